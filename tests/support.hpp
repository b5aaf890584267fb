// Shared helpers for flashjit's tests.
#pragma once

#include <string>

#include "flashjit/flashjit.hpp"

namespace flashjit::test {

// True when a CUDA driver and a device are usable.
bool gpu_available();

// Records that the running test case could not do its work (no GPU, no ptxas) and why, and prints
// "SKIPPED: <test>: <reason>". A run with skips and no failure exits 69, which CTest
// (SKIP_RETURN_CODE 69, each test case run alone) reports as skipped: never as passed. Catch2 v2
// has no skip of its own (SKIP arrived in v3.3). Use SKIP_TEST to leave the test case.
void record_skip(const std::string& reason);
int skipped_count();

// Runs a shell command, returning its exit code and combined stdout+stderr.
struct Command {
  int code = -1;
  std::string output;
};
Command run_command(const std::string& cmd);

// How many compiled-kernel entries the compile cache under `root` holds.
size_t kernel_files(const std::string& root);

// A fresh empty directory under /tmp, removed by the destructor.
struct TempDir {
  std::string path;
  TempDir();
  ~TempDir();
};

// A fresh, empty cache root (set_cache_dir) for the scope, the default root again after it.
struct ScopedCacheDir {
  TempDir dir;
  ScopedCacheDir();
  ~ScopedCacheDir();
};

}  // namespace flashjit::test

#define SKIP_TEST(reason)                   \
  do {                                      \
    flashjit::test::record_skip(reason);    \
    return;                                 \
  } while (0)

#define REQUIRE_GPU_OR_SKIP()                                                         \
  do {                                                                                \
    if (!flashjit::test::gpu_available()) SKIP_TEST("no CUDA driver or device");      \
  } while (0)

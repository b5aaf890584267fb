// Shared helpers for flashjit's tests.
#pragma once

#include <string>

#include "flashjit/flashjit.hpp"

namespace flashjit::test {

// True when a CUDA driver and a device are usable. [gpu] tests that run in a mixed selection
// without one return early with a warning; run alone (as CTest does) they exit 69 = skipped.
bool gpu_available();

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

}  // namespace flashjit::test

#define REQUIRE_GPU_OR_SKIP()                                              \
  do {                                                                     \
    if (!flashjit::test::gpu_available()) {                                \
      WARN("no CUDA driver or device: this [gpu] test did not run");      \
      return;                                                              \
    }                                                                      \
  } while (0)

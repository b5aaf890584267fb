// Shared helpers of the autotune tests: temp folders, stderr capture, sample entries, child processes.
#pragma once

#include <llvm/Support/JSON.h>

#include <string>
#include <vector>

#include "autotune/compile_cache.hpp"
#include "autotune/tuning_cache.hpp"

namespace flashjit::autotune::test {

// A fresh folder under $TMPDIR (or /tmp), removed with its contents at scope exit.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Redirects file descriptor 2 to a temp file for its lifetime; text() returns what was written.
// The library logs through stderr (support/log.cpp), so this is how tests count warnings.
class StderrCapture {
 public:
  StderrCapture();
  ~StderrCapture();
  std::string text();  // stops the capture (idempotent) and returns everything captured
  int warnings();      // number of "[flashjit warn]" lines

 private:
  int saved_ = -1;
  std::string file_;
  std::string text_;
  bool done_ = false;
};

// Deterministic artifacts of about `ptx_bytes`, distinct per seed.
KernelArtifacts sample_artifacts(const std::string& seed, size_t ptx_bytes = 2000);
// A compile-cache key text like the runtime's: version, format, LLVM, PTX, arch, driver, spec, config.
std::string sample_key(const std::string& flashjit_version, int driver, const std::string& spec, const std::string& config);

GpuIdentity sample_gpu(int driver = 13000);
TuningKey sample_tuning_key(const std::string& spec_hash, int64_t seq = 4096);
TuningEntry sample_entry(int block_m, double median_ms, const std::string& spec_name = "test_spec");

bool same_entry(const TuningEntry& a, const TuningEntry& b);
bool same_artifacts(const KernelArtifacts& a, const KernelArtifacts& b);

// `text` parsed as one JSON value; a parse error fails the test with LLVM's message.
llvm::json::Value parse_json(const std::string& text);
// Starts this test binary with `args` (the first is the hidden child switch), stdout and stderr
// to `log_path`; returns the pid. wait_child returns the exit status (or -signal).
int spawn_self(const std::vector<std::string>& args, const std::string& log_path);
int wait_child(int pid);

// The hidden child mode of the test binary (see main.cpp).
int child_main(int argc, char** argv);
// `--autotune-child crasher ROOT SEED`: writes both caches until killed (test_crash.cpp).
int crasher_main(int argc, char** argv);

}  // namespace flashjit::autotune::test

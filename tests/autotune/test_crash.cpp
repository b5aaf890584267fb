// Crash consistency: a process killed with SIGKILL at a random point while it writes the compile
// and tuning caches leaves every entry at its final name whole — each one loads — and nothing
// partial is ever listed or used (temp files are named apart and never read).
#include <catch2/catch.hpp>

#include <signal.h>
#include <time.h>

#include <filesystem>
#include <random>

#include "autotune/durable_file.hpp"
#include "autotune/tuning_yaml.hpp"
#include "helpers.hpp"

namespace fs = std::filesystem;

namespace flashjit::autotune::test {

int crasher_main(int argc, char** argv) {
  if (argc != 5) return 64;
  const std::string root = argv[3];
  std::mt19937 rng(static_cast<unsigned>(std::atoi(argv[4])));
  CompileCache cc(root, 256 * 1024);  // small: eviction (unlinks under the lock) runs too
  TuningCache tc(root, "0.1.0");
  for (unsigned i = 0;; ++i) {
    const std::string spec = "spec" + std::to_string(rng() % 12);
    cc.put(sample_key("0.1.0", 13000, spec, "cfg"), sample_artifacts(spec + std::to_string(i), 2000 + rng() % 40000));
    TuningEntry e = sample_entry(64, 0.1 + (rng() % 1000) / 1000.0, spec);
    tc.store(sample_gpu(), sample_tuning_key(spec, int64_t(128) << (rng() % 6)), e);
  }
}

TEST_CASE("crash consistency: a writer killed at random points 100 times leaves only whole entries",
          "[autotune][cache][processes][crash]") {
  TempDir dir;
  std::mt19937 rng(20261201);
  size_t kernels_seen = 0, tunings_seen = 0;
  for (int trial = 0; trial < 100; ++trial) {
    const int pid = spawn_self({"--autotune-child", "crasher", dir.path(), std::to_string(trial)}, dir.path() + "/log");
    timespec nap{0, long(1 + rng() % 40) * 1000000L};  // 1-40 ms: process start, then any point of a write
    nanosleep(&nap, nullptr);
    ::kill(pid, SIGKILL);
    REQUIRE(wait_child(pid) == -SIGKILL);

    StderrCapture err;
    CompileCache cc(dir.path(), 256 * 1024);
    for (const CachedKernelFile& f : cc.list()) {
      INFO("trial " << trial << ": " << f.path);
      const ReadResult r = read_file_status(f.path);
      if (r.status == ReadResult::Status::missing) continue;  // evicted since listed: a miss
      const DecodeResult d = decode_kernel_entry(r.content);
      REQUIRE(d.entry);  // a whole entry at its final name, never a torn one
      CHECK(cc.get(d.entry->key_text));
      ++kernels_seen;
    }
    TuningCache tc(dir.path(), "0.1.0");
    for (const TuningFile& f : tc.load_all()) tunings_seen += f.records.size();
    if (fs::exists(tc.path_for(sample_gpu())))
      CHECK_NOTHROW(parse_tuning_file(read_file_status(tc.path_for(sample_gpu())).content, "tuning"));
    INFO("trial " << trial);
    CHECK(err.warnings() == 0);  // no entry was found damaged or moved aside
  }
  // The writers got far enough to test anything.
  CHECK(kernels_seen > 0);
  CHECK(tunings_seen > 0);
}

}  // namespace flashjit::autotune::test

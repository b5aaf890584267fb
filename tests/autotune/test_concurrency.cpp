// Issue 5, done-when 1: 8 processes writing compile-cache and tuning-cache entries at the same
// time leave every entry present and readable.
#include <catch2/catch.hpp>

#include <time.h>

#include <filesystem>

#include "autotune/durable_file.hpp"
#include "helpers.hpp"

namespace flashjit::autotune::test {
namespace {

constexpr int kProcesses = 8;
constexpr int kPerProcess = 6;
const char* kVersion = "0.1.0";

std::string own_key(int proc, int j) { return sample_key(kVersion, 13000, "spec-" + std::to_string(proc), "cfg" + std::to_string(j)); }
std::string own_seed(int proc, int j) { return "p" + std::to_string(proc) + "e" + std::to_string(j); }
std::string shared_key(int j) { return sample_key(kVersion, 13000, "shared", "cfg" + std::to_string(j)); }
std::string shared_seed(int j, int proc) { return "shared" + std::to_string(j) + "_by" + std::to_string(proc); }
TuningKey own_tuning_key(int proc, int j) { return sample_tuning_key("spec-" + std::to_string(proc), int64_t(128) << j); }
TuningEntry own_entry(int proc, int j) {
  TuningEntry e = sample_entry(j % 2 ? 128 : 64, 0.25 + proc + j / 10.0, "spec-" + std::to_string(proc));
  e.flashjit_version = kVersion;
  return e;
}

// A shared entry is valid when it is exactly what one of the writers wrote.
bool is_some_writers(const KernelArtifacts& a, int j) {
  for (int p = 0; p < kProcesses; ++p)
    if (same_artifacts(a, sample_artifacts(shared_seed(j, p), 5000))) return true;
  return false;
}

}  // namespace

// argv: --autotune-child writer ROOT INDEX START_SEC START_NSEC
int child_main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[2]) == "crasher") return crasher_main(argc, argv);
  if (argc != 7 || std::string(argv[2]) != "writer") return 64;
  const std::string root = argv[3];
  const int me = std::atoi(argv[4]);
  timespec start{std::atol(argv[5]), std::atol(argv[6])};
  // Start together, so the writes really overlap.
  while (true) {
    timespec now = now_realtime();
    if (now.tv_sec > start.tv_sec || (now.tv_sec == start.tv_sec && now.tv_nsec >= start.tv_nsec)) break;
    timespec nap{0, 200000};
    nanosleep(&nap, nullptr);
  }
  CompileCache cc(root);
  TuningCache tc(root, kVersion);
  const GpuIdentity gpu = sample_gpu();
  for (int j = 0; j < kPerProcess; ++j) {
    if (!cc.put(own_key(me, j), sample_artifacts(own_seed(me, j), 3000 + 1500 * j))) return 3;
    if (!cc.put(shared_key(j), sample_artifacts(shared_seed(j, me), 5000))) return 3;
    tc.store(gpu, own_tuning_key(me, j), own_entry(me, j));
    TuningEntry shared = own_entry(me, j);
    tc.store(gpu, sample_tuning_key("shared", 1024), shared);
    // Read what the others wrote so far: anything found must be complete and exact.
    for (int p = 0; p < kProcesses; ++p) {
      if (auto a = cc.get(own_key(p, j)); a && !same_artifacts(*a, sample_artifacts(own_seed(p, j), 3000 + 1500 * j)))
        return 4;
      if (auto a = cc.get(shared_key(j)); a && !is_some_writers(*a, j)) return 5;
      if (auto e = tc.lookup(gpu, own_tuning_key(p, j)); e && !same_entry(*e, own_entry(p, j))) return 6;
    }
  }
  return 0;
}

TEST_CASE("8 processes writing both caches at once lose no entry and corrupt none", "[autotune][cache][processes]") {
  TempDir dir;
  timespec start = now_realtime();
  start.tv_nsec += 300 * 1000 * 1000;  // time for all children to start before the first write
  if (start.tv_nsec >= 1000000000) start.tv_sec += 1, start.tv_nsec -= 1000000000;
  std::vector<int> pids;
  for (int p = 0; p < kProcesses; ++p)
    pids.push_back(spawn_self({"--autotune-child", "writer", dir.path(), std::to_string(p), std::to_string(start.tv_sec),
                               std::to_string(start.tv_nsec)},
                              dir.path() + "/child" + std::to_string(p) + ".log"));
  std::vector<int> status;
  for (int pid : pids) status.push_back(wait_child(pid));
  for (int p = 0; p < kProcesses; ++p) {
    std::string log = read_file_status(dir.path() + "/child" + std::to_string(p) + ".log").content;
    INFO("child " << p << " (exit 3: put failed, 4-6: read a wrong entry) log: " << log);
    CHECK(status[p] == 0);
    CHECK(log.find("[flashjit warn]") == std::string::npos);  // no torn file was ever seen
  }

  StderrCapture err;
  CompileCache cc(dir.path());
  TuningCache tc(dir.path(), kVersion);
  for (int p = 0; p < kProcesses; ++p)
    for (int j = 0; j < kPerProcess; ++j) {
      auto a = cc.get(own_key(p, j));
      REQUIRE(a);
      CHECK(same_artifacts(*a, sample_artifacts(own_seed(p, j), 3000 + 1500 * j)));
      auto e = tc.lookup(sample_gpu(), own_tuning_key(p, j));
      REQUIRE(e);
      CHECK(same_entry(*e, own_entry(p, j)));
    }
  for (int j = 0; j < kPerProcess; ++j) {
    auto a = cc.get(shared_key(j));
    REQUIRE(a);
    CHECK(is_some_writers(*a, j));
  }
  CHECK(cc.stats().entries == size_t(kProcesses * kPerProcess + kPerProcess));
  std::vector<TuningFile> files = tc.load_all();
  REQUIRE(files.size() == 1);
  CHECK(files[0].records.size() == size_t(kProcesses * kPerProcess + 1));  // + the key all of them stored
  CHECK(tc.lookup(sample_gpu(), sample_tuning_key("shared", 1024)));
  // No temp file is left behind by a successful writer.
  for (const char* sub : {"/kernels", "/tuning"})
    for (auto& f : std::filesystem::directory_iterator(dir.path() + sub))
      CHECK(f.path().filename().string().find(".tmp.") == std::string::npos);
  CHECK(err.warnings() == 0);
}

}  // namespace flashjit::autotune::test

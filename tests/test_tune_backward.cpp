// Tuning the backward's configs: `flashjit tune --backward`, its own key in the tuning cache, and
// Kernel::backward's per-bucket choice (stored tuning, autotune off, a given config).
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>

#include "flashjit/tuning.hpp"
#include "tests/support.hpp"

using namespace flashjit;
using test::ScopedCacheDir;
namespace fs = std::filesystem;

namespace {

const std::string kCli = (fs::read_symlink("/proc/self/exe").parent_path() / "flashjit").string();

AttentionSpec spec64() {
  AttentionSpec s;
  s.name = "tune_backward_test";
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = 64;
  s.mask = "causal";
  return s;
}

ProblemShape shape(int64_t heads, int64_t seq) {
  ProblemShape s;
  s.batch = 1;
  s.heads_q = s.heads_kv = heads;
  s.seq_q = s.seq_kv = seq;
  return s;
}

}  // namespace

TEST_CASE("tune --backward: documented, checked before the GPU, exit 69 without one", "[tune][backward][cli]") {
  test::TempDir d;
  const std::string spec = d.path + "/s.yaml";
  std::ofstream(spec) << "name: t\ndtype: bf16\nhead_dim: 64\nmask: causal\n";
  auto help = test::run_command(kCli + " tune --help");
  CHECK(help.code == 0);
  CHECK_THAT(help.output, Catch::Contains("--backward"));
  CHECK(test::run_command(kCli + " tune " + spec + " --backward --shapes 1x2x0x128").code == 2);
  if (!test::gpu_available()) {
    auto r = test::run_command(kCli + " tune " + spec + " --backward --shapes 1x2x128x128");
    CHECK(r.code == 69);
    CHECK_THAT(r.output, Catch::Contains("nothing ran"));
  }
}

// ---- on the GPU ------------------------------------------------------------------------------------

TEST_CASE("tune --backward: stored under its own key and used by Kernel::backward for the bucket",
          "[tune][backward][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  ScopedCacheDir cache;
  Runtime rt = Runtime::create(0);
  TuneOptions options;
  options.mode = "quick";
  options.reps = 3;
  options.backward = true;
  TuneReport o = tune(rt, spec64(), shape(4, 512), options);
  INFO(o.summary);
  REQUIRE(o.found);
  CHECK(o.stored);
  CHECK_THAT(o.key, Catch::StartsWith("bwd-"));
  CHECK_THAT(o.search_json, Catch::Contains("\"candidates\""));
  std::optional<TileConfig> stored = stored_tuning(rt, spec64(), shape(4, 512), /*backward=*/true);
  REQUIRE(stored);
  CHECK(stored->str() == o.best.str());
  CHECK_FALSE(stored_tuning(rt, spec64(), shape(4, 512)));  // the forward's key has no entry

  // Same bucket (seq 500 → 512): the stored config, no tuning; autotune off: the heuristic; a given
  // backward config: that one.
  CompileOptions tuned;
  tuned.autotune = "quick";
  tuned.tune_on_first_use = false;
  const uint64_t tunes = cache_stats().tunes;
  Kernel k = rt.compile(spec64(), tuned);
  CHECK(k.backward_compiled(shape(4, 500)).config.str() == o.best.str());
  CHECK(cache_stats().tunes == tunes);
  CompileOptions off;
  off.autotune = "off";
  Kernel h = rt.compile(spec64(), off);
  CHECK(h.backward_compiled(shape(4, 500)).config.str() == o.heuristic.str());
  CHECK(h.backward_compiled(shape(4, 500)).config.str() == h.backward_compiled().config.str());
  CompileOptions given = tuned;
  given.backward_config = TileConfig{32, 64, 4, 1};
  CHECK(rt.compile(spec64(), given).backward_compiled(shape(4, 500)).config.str() == "bm32_bn64_w4_s1");
}

TEST_CASE("tune --backward: the CLI tunes, and `run --backward` verifies the tuned kernel against fp64",
          "[tune][backward][gpu][cli]") {
  REQUIRE_GPU_OR_SKIP();
  test::TempDir d;
  const std::string spec = d.path + "/s.yaml";
  std::ofstream(spec) << "name: t\ndtype: bf16\nhead_dim: 128\nmask: window(100, 0)\n";
  const std::string env = "FLASHJIT_CACHE_DIR=" + d.path + "/cache FLASHJIT_AUTOTUNE=quick ";
  auto tune = test::run_command(env + kCli + " tune " + spec + " --backward --shapes 1x2x300x300 --json");
  INFO(tune.output);
  REQUIRE(tune.code == 0);
  CHECK_THAT(tune.output, Catch::Contains("\"key\": \"bwd-") || Catch::Contains("\"key\":\"bwd-"));
  auto run = test::run_command(env + "FLASHJIT_LOG=info " + kCli + " run " + spec +
                               " --backward --batch 1 --heads 2 --seq 300 --reps 2");
  INFO(run.output);
  CHECK(run.code == 0);
  // Both passes run their bucket's tuned config (the forward's tuned on first use, quick). Whether
  // the forward's split count is tuned too ("split-KV into N (tuned)") depends on timings: a
  // fixed count is kept only when it beats the automatic one by 3%.
  CHECK(std::regex_search(run.output, std::regex(R"(\] launch [0-9a-f]+ grid [^\n]* config \S+ \(tuned )")));
  CHECK(std::regex_search(
      run.output, std::regex(R"(backward bucket sq512_skv512_bh2_d128x128 of [0-9a-f]+: config \S+ \(tuned )")));
}

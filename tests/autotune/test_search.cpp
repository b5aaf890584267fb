// The autotuner's search with fake callbacks and a fake clock: pruning, failures, identical
// binaries, quick mode, deadlines, progress lines, the summary and the JSON form.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>

#include "autotune/search.hpp"
#include "autotune/tuning_key.hpp"
#include "helpers.hpp"

namespace flashjit::autotune::test {
namespace {

// A fake GPU: time = f(config), each measurement advances the fake clock by `cost_s`.
struct FakeGpu {
  double now = 0;
  double cost_s = 0.5;
  std::map<std::string, int> timed;  // config name → measure() calls
  std::function<Measurement(const TileConfig&)> behave = [](const TileConfig& c) {
    Measurement m;
    m.ok = true;
    // Fastest at bm128_bn64_w8_s2; every step away costs 10%.
    double t = 1.0;
    t *= c.block_m == 128 ? 1.0 : 1.1;
    t *= c.block_n == 64 ? 1.0 : 1.1;
    t *= c.num_warps == 8 ? 1.0 : 1.1;
    t *= c.num_stages == 2 ? 1.0 : 1.1;
    m.median_ms = t, m.p20_ms = t * 0.99, m.p80_ms = t * 1.01;
    m.binary_hash = config_name(c);
    return m;
  };
  SearchCallbacks callbacks() {
    SearchCallbacks cb;
    cb.measure = [this](const TileConfig& c) {
      now += cost_s;
      ++timed[config_name(c)];
      return behave(c);
    };
    return cb;
  }
  SearchOptions options(TuneMode mode) {
    SearchOptions o;
    o.mode = mode;
    o.heuristic = TileConfig{64, 64, 4, 2};
    o.clock = [this] { return now; };
    return o;
  }
};

const SearchSpace kSpace = {{64, 128}, {32, 64, 128}, {4, 8}, {1, 2}};  // 24 configs

const Candidate& find(const SearchResult& r, const std::string& name) {
  for (const Candidate& c : r.candidates)
    if (config_name(c.config) == name) return c;
  FAIL("no candidate " << name);
  throw;
}

}  // namespace

TEST_CASE("search full: every config enumerated once, pruned ones carry their reason, the fastest wins",
          "[autotune][search]") {
  FakeGpu gpu;
  SearchCallbacks cb = gpu.callbacks();
  cb.prune = [](const TileConfig& c) -> std::optional<std::string> {
    if (c.block_m * c.block_n > 128 * 64) return "shared memory " + std::to_string(c.block_m * c.block_n) + " > limit";
    return std::nullopt;
  };
  SearchResult r = run_search(kSpace, gpu.options(TuneMode::full), cb);
  CHECK(r.candidates.size() == 24);
  CHECK(r.selected == 20);  // bm128_bn128 × 2 warps × 2 stages = 4 pruned
  size_t pruned = 0;
  for (const Candidate& c : r.candidates)
    if (c.status == Candidate::Status::pruned) {
      ++pruned;
      CHECK(c.config.block_m * c.config.block_n > 128 * 64);
      CHECK_THAT(c.note, Catch::StartsWith("shared memory"));
      CHECK(gpu.timed.count(config_name(c.config)) == 0);  // never timed
    }
  CHECK(pruned == 24 - r.selected);
  REQUIRE(r.measured);
  CHECK(config_name(r.best) == "bm128_bn64_w8_s2");
  CHECK(r.best_m.median_ms == Approx(1.0));
  CHECK(config_name(r.candidates[0].config) == "bm64_bn64_w4_s2");  // the heuristic is timed first
  CHECK_THAT(r.summary, Catch::Contains("faster than the heuristic default bm64_bn64_w4_s2"));
  for (auto& [name, n] : gpu.timed) CHECK(n == 1);
}

TEST_CASE("search: a later config replaces the best only when more than 1% faster, so ties keep the nearer one",
          "[autotune][search]") {
  for (double later : {0.995, 0.98}) {
    FakeGpu gpu;
    // The heuristic bm64_bn64_w4_s2 takes 1 ms; bm64_bn128_w4_s2, timed after it, `later` ms; the
    // rest are slower.
    gpu.behave = [later](const TileConfig& c) {
      Measurement m;
      m.ok = true;
      const std::string name = config_name(c);
      const double t = name == "bm64_bn64_w4_s2" ? 1.0 : name == "bm64_bn128_w4_s2" ? later : 2.0;
      m.median_ms = t, m.p20_ms = t, m.p80_ms = t;
      m.binary_hash = name;
      return m;
    };
    SearchResult r = run_search(kSpace, gpu.options(TuneMode::full), gpu.callbacks());
    INFO("later " << later);
    REQUIRE(r.measured);
    CHECK(config_name(r.best) == (later > 0.99 ? "bm64_bn64_w4_s2" : "bm64_bn128_w4_s2"));
    if (later > 0.99)
      CHECK_THAT(r.summary, Catch::Contains("kept over bm64_bn128_w4_s2, 0.5% faster") && Catch::Contains("tie margin"));
    else CHECK_THAT(r.summary, !Catch::Contains("kept over"));
  }
}

TEST_CASE("search: failing configs are infinitely slow, listed with their reason, never thrown", "[autotune][search]") {
  FakeGpu gpu;
  auto normal = gpu.behave;
  gpu.behave = [normal](const TileConfig& c) {
    if (c.num_warps == 8) {
      Measurement m;
      m.ok = false;
      m.failure_reason = "ptxas: 300 registers exceed 255";
      return m;
    }
    if (c.block_n == 128) throw Error(ErrorKind::cuda, "cuLaunchKernel: too many resources requested");
    return normal(c);
  };
  SearchResult r = run_search(kSpace, gpu.options(TuneMode::full), gpu.callbacks());
  REQUIRE(r.measured);
  CHECK(config_name(r.best) == "bm128_bn64_w4_s2");  // the best that ran
  const Candidate& f = find(r, "bm128_bn64_w8_s2");
  CHECK(f.status == Candidate::Status::failed);
  CHECK(f.note == "ptxas: 300 registers exceed 255");
  CHECK(f.m.median_ms == std::numeric_limits<double>::infinity());
  const Candidate& t = find(r, "bm64_bn128_w4_s1");
  CHECK(t.status == Candidate::Status::failed);
  CHECK_THAT(t.note, Catch::Contains("too many resources"));
  std::ostringstream table;
  print_search_summary(table, r);
  CHECK_THAT(table.str(), Catch::Contains("ptxas: 300 registers exceed 255"));
  std::string json = search_result_json(r);
  CHECK_THAT(json, Catch::Contains("\"status\":\"failed\""));
  CHECK_THAT(json, Catch::Contains("\"median_ms\":null"));  // infinity is not JSON
}

TEST_CASE("search: when every config fails, the heuristic default is used and that is said", "[autotune][search]") {
  FakeGpu gpu;
  gpu.behave = [](const TileConfig&) {
    Measurement m;
    m.failure_reason = "no GPU";
    return m;
  };
  SearchResult r = run_search(kSpace, gpu.options(TuneMode::quick), gpu.callbacks());
  CHECK_FALSE(r.measured);
  CHECK(config_name(r.best) == "bm64_bn64_w4_s2");
  CHECK_THAT(r.summary, Catch::Contains("no candidate ran successfully"));
}

TEST_CASE("search: byte-identical binaries are timed once", "[autotune][search]") {
  FakeGpu gpu;
  SearchCallbacks cb = gpu.callbacks();
  int fingerprints = 0;
  // num_stages does not change the code in this fake compiler: s1 and s2 give the same cubin.
  cb.fingerprint = [&](const TileConfig& c) {
    ++fingerprints;
    return "bm" + std::to_string(c.block_m) + "_bn" + std::to_string(c.block_n) + "_w" + std::to_string(c.num_warps);
  };
  SearchResult r = run_search(kSpace, gpu.options(TuneMode::full), cb);
  CHECK(fingerprints == 24);
  CHECK(r.timed == 12);
  CHECK(gpu.timed.size() == 12);
  size_t reused = 0;
  for (const Candidate& c : r.candidates)
    if (c.status == Candidate::Status::reused) {
      ++reused;
      CHECK_THAT(c.note, Catch::StartsWith("same binary as"));
      TileConfig twin = c.config;
      twin.num_stages = 3 - c.config.num_stages;
      CHECK(c.m.median_ms == find(r, config_name(twin)).m.median_ms);
    }
  CHECK(reused == 12);
}

TEST_CASE("search quick: at most 8 candidates, the heuristic default first, its neighbours next", "[autotune][search]") {
  FakeGpu gpu;
  SearchResult r = run_search(kSpace, gpu.options(TuneMode::quick), gpu.callbacks());
  CHECK(r.selected <= 8);
  CHECK(r.timed == r.selected);
  CHECK(gpu.timed.size() == r.selected);
  CHECK(config_name(r.candidates[0].config) == "bm64_bn64_w4_s2");
  CHECK(gpu.timed.count("bm64_bn64_w4_s2") == 1);
  // The others are one step from the heuristic in rows per warp (block_m / num_warps), warps,
  // block_n or stages: its nearest neighbours, nearest first.
  auto steps = [](const TileConfig& c) {
    return (c.block_m / c.num_warps != 16) + (c.block_n != 64) + (c.num_warps != 4) + (c.num_stages != 2);
  };
  for (size_t i = 1; i < r.selected; ++i) CHECK(steps(r.candidates[i].config) >= steps(r.candidates[i - 1].config));
  CHECK(steps(r.candidates[1].config) == 1);
  for (size_t i = r.selected; i < r.candidates.size(); ++i)
    CHECK(r.candidates[i].status == Candidate::Status::not_selected);
  // The heuristic is timed even when the space does not contain it, and when it is pruned that is said.
  SearchOptions o = gpu.options(TuneMode::quick);
  o.heuristic = TileConfig{32, 32, 2, 1};
  SearchResult r2 = run_search(kSpace, o, gpu.callbacks());
  CHECK(config_name(r2.candidates[0].config) == "bm32_bn32_w2_s1");
  SearchCallbacks cb = gpu.callbacks();
  cb.prune = [](const TileConfig& c) -> std::optional<std::string> {
    if (c.block_m == 32) return std::string("block_m 32 < 64 (mma tile)");
    return std::nullopt;
  };
  SearchResult r3 = run_search(kSpace, o, cb);
  CHECK_THAT(r3.summary, Catch::Contains("the heuristic default was pruned: block_m 32 < 64"));
}

TEST_CASE("search: the deadline stops timing and the best so far is used, said so", "[autotune][search]") {
  FakeGpu gpu;  // 0.5 s per measurement
  SearchOptions o = gpu.options(TuneMode::full);
  o.deadline_s = 2.0;
  SearchResult r = run_search(kSpace, o, gpu.callbacks());
  CHECK(r.deadline_hit);
  CHECK(r.timed == 4);  // at 0, 0.5, 1.0, 1.5 s; at 2.0 s the deadline stops it
  CHECK(gpu.now == Approx(2.0));
  REQUIRE(r.measured);
  size_t skipped = 0;
  for (const Candidate& c : r.candidates)
    if (c.status == Candidate::Status::skipped) {
      ++skipped;
      CHECK_THAT(c.note, Catch::Contains("deadline"));
    }
  CHECK(skipped == r.selected - 4);
  CHECK_THAT(r.summary, Catch::Contains("deadline of 2.0s reached after 4/24 candidates, best so far used"));
  // A deadline of zero times nothing and says that the heuristic default is used.
  o.deadline_s = 0.0;
  SearchResult z = run_search(kSpace, o, gpu.callbacks());
  CHECK(z.timed == 0);
  CHECK_FALSE(z.measured);
  CHECK(config_name(z.best) == "bm64_bn64_w4_s2");
}

TEST_CASE("search: progress lines for runs longer than a second, silence for short ones", "[autotune][search]") {
  FakeGpu gpu;
  std::ostringstream out;
  SearchOptions o = gpu.options(TuneMode::quick);
  o.progress = &out;
  SearchResult r = run_search(kSpace, o, gpu.callbacks());  // 8 × 0.5 s
  const std::string text = out.str();
  INFO(text);
  CHECK_THAT(text, Catch::Contains("[1/8] bm64_bn64_w4_s2 → 1.210 ms (best 1.210 ms bm64_bn64_w4_s2) ETA 3.5s"));
  CHECK_THAT(text, Catch::Contains("[8/8] "));
  CHECK_THAT(text, Catch::Contains("ETA 0.0s"));
  CHECK_THAT(text, Catch::Contains("autotune summary (quick"));
  CHECK_THAT(text, Catch::Contains(r.summary));

  FakeGpu fast;
  fast.cost_s = 0.01;  // 8 × 10 ms: no lines
  std::ostringstream quiet;
  SearchOptions q = fast.options(TuneMode::quick);
  q.progress = &quiet;
  run_search(kSpace, q, fast.callbacks());
  CHECK(quiet.str().empty());
}

TEST_CASE("search off: no timing, the heuristic default, logged as such", "[autotune][search]") {
  FakeGpu gpu;
  SearchResult r = run_search(kSpace, gpu.options(TuneMode::off), gpu.callbacks());
  CHECK(r.timed == 0);
  CHECK(gpu.timed.empty());
  CHECK(config_name(r.best) == "bm64_bn64_w4_s2");
  CHECK_THAT(r.summary, Catch::StartsWith("autotune off: using the heuristic default bm64_bn64_w4_s2"));
  CHECK(parse_tune_mode("full") == TuneMode::full);
  CHECK_THROWS_WITH(parse_tune_mode("fast"), Catch::Contains("off|quick|full"));
  CHECK_THROWS_AS(run_search(SearchSpace{{64}, {}, {4}, {1}}, gpu.options(TuneMode::full), gpu.callbacks()), Error);
}

TEST_CASE("search JSON is well formed for a typical result", "[autotune][search]") {
  FakeGpu gpu;
  SearchResult r = run_search(kSpace, gpu.options(TuneMode::quick), gpu.callbacks());
  const llvm::json::Value j = parse_json(search_result_json(r));
  const llvm::json::Object& o = *j.getAsObject();
  CHECK(o.getString("mode") == "quick");
  const llvm::json::Object& best = *o.getObject("best");
  CHECK(best.getInteger("block_m") == 128);
  CHECK(best.getInteger("block_n") == 64);
  CHECK(best.getInteger("num_warps") == 8);
  CHECK(best.getInteger("num_stages") == 2);
  CHECK(o.getArray("candidates")->size() == r.candidates.size());
}

}  // namespace flashjit::autotune::test

namespace flashjit::autotune::test {

TEST_CASE("a search result becomes a tuning entry with the runner-up table", "[autotune][search]") {
  FakeGpu gpu;
  auto normal = gpu.behave;
  gpu.behave = [normal](const TileConfig& c) {
    if (c.num_stages == 1 && c.block_n == 32) {
      Measurement m;
      m.failure_reason = "launch failed: misaligned address";
      return m;
    }
    return normal(c);
  };
  SearchResult r = run_search(kSpace, gpu.options(TuneMode::full), gpu.callbacks());
  TuningEntry e = tuning_entry_from(r, "causal");
  CHECK(same_config(e.best, r.best));
  CHECK(e.median_ms == r.best_m.median_ms);
  CHECK(e.mode == "full");
  REQUIRE(e.runners_up.size() == 23);
  for (size_t i = 0; i < 19; ++i) {
    CHECK(e.runners_up[i].ok);
    if (i) CHECK(e.runners_up[i - 1].median_ms <= e.runners_up[i].median_ms);
  }
  for (size_t i = 19; i < 23; ++i) {  // bn32 with one stage: 2 block_m x 2 warps, listed last
    CHECK_FALSE(e.runners_up[i].ok);
    CHECK(e.runners_up[i].failure == "launch failed: misaligned address");
  }
  SearchOptions o = gpu.options(TuneMode::off);
  CHECK_THROWS_AS(tuning_entry_from(run_search(kSpace, o, gpu.callbacks()), "x"), Error);
}

TEST_CASE("search quick: the resource model runs only until the handful of candidates is found", "[autotune][search]") {
  // Pruning may compile a config (to read its spills): quick mode must not pay that for the
  // whole space. Here 128-key tiles "spill"; quick visits nearest-first and stops at 8 survivors.
  FakeGpu gpu;
  SearchCallbacks cb = gpu.callbacks();
  std::vector<std::string> asked;
  cb.prune = [&](const TileConfig& c) -> std::optional<std::string> {
    asked.push_back(config_name(c));
    if (c.block_n == 128) return std::string("spills 64 bytes");
    return std::nullopt;
  };
  SearchResult quick = run_search(kSpace, gpu.options(TuneMode::quick), cb);
  CHECK(quick.selected == 8);
  CHECK(asked.size() < 24);
  CHECK(asked.front() == "bm64_bn64_w4_s2");  // the heuristic is the first one checked
  size_t pruned = 0;
  for (const Candidate& c : quick.candidates) pruned += c.status == Candidate::Status::pruned;
  CHECK(asked.size() == quick.selected + pruned);  // every check is a survivor or a reported prune
  asked.clear();
  SearchResult full = run_search(kSpace, gpu.options(TuneMode::full), cb);
  CHECK(asked.size() == 24);  // full mode checks the whole space
  CHECK(full.selected == 16);
}

}  // namespace flashjit::autotune::test

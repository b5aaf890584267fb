// The forward kernel on the GPU against the fp64 reference (the numerics rule of docs/architecture.md): fresh
// random inputs, NaN-poisoned outputs, odd shapes, GQA, BHSD strides, fully masked rows.
#include <catch2/catch.hpp>

#include <random>

#include "tests/gpu_case.hpp"
#include "tests/support.hpp"

using namespace flashjit;

using test::Case;
using test::make_spec;
using test::run_case;

namespace {

void run_matrix(DType dt, int d, const std::string& mask) {
  Runtime rt = Runtime::create(0);
  const std::pair<int64_t, int64_t> shapes[] = {{128, 128}, {1000, 1000}, {113, 203}, {4096, 4096}};
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  for (auto [sq, skv] : shapes) {
    Case c;
    c.spec = make_spec(dt, d, d, mask);
    c.seq_q = sq;
    c.seq_kv = skv;
    c.batch = sq >= 4096 ? 1 : 2;
    ref::Verdict v = run_case(rt, c, seed++);
    INFO("sq=" << sq << " skv=" << skv << ": " << v.message);
    CHECK(v.ok);
  }
}

// One launch for check_shape_row: its mask, its length (queries and keys) and the config it should run.
struct ShapeRow {
  const char* mask;
  int64_t seq;
  const char* config;
};

// Checks what Kernel::describe_launch says of `r`'s launch on wgmma: not split, `r.config`, with
// `row_reason` when that is `row_config` (the row's, not the table's). Returns the case.
Case check_shape_row(Runtime& rt, int d, int64_t heads, const ShapeRow& r, const char* row_config,
                     const char* row_reason, uint64_t seed) {
  const bool wgmma = rt.device().arch() == "sm_90a";  // the rows' tiles are wgmma's
  const Case c = Case::of(make_spec(DType::bf16, d, d, r.mask), r.seq, r.seq, 2, heads, heads);
  CompileOptions opts;
  opts.autotune = "off";
  Kernel kernel = rt.compile(c.spec, opts);
  std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, seed);
  const std::string text = kernel.describe_launch(dp->args);
  INFO(r.mask << " seq " << r.seq << ": " << text);
  if (wgmma) {  // elsewhere other tiles, CTA counts and so split-KV choices: the rows are wgmma's
    CHECK_THAT(text, !Catch::Contains("split-KV"));
    CHECK_THAT(text, Catch::Contains(std::string("config ") + r.config));
    if (std::string(r.config) == row_config) CHECK_THAT(text, Catch::Contains(row_reason));
  }
  return c;
}

}  // namespace

TEST_CASE("gpu forward: fp16 d=64 none", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::f16, 64, "none"); }
TEST_CASE("gpu forward: fp16 d=64 causal", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::f16, 64, "causal"); }
TEST_CASE("gpu forward: fp16 d=128 none", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::f16, 128, "none"); }
TEST_CASE("gpu forward: fp16 d=128 causal", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::f16, 128, "causal"); }
TEST_CASE("gpu forward: bf16 d=64 none", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::bf16, 64, "none"); }
TEST_CASE("gpu forward: bf16 d=64 causal", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::bf16, 64, "causal"); }
TEST_CASE("gpu forward: bf16 d=128 none", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::bf16, 128, "none"); }
TEST_CASE("gpu forward: bf16 d=128 causal", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::bf16, 128, "causal"); }

TEST_CASE("gpu forward: odd head dims and d_qk != d_v and GQA/MQA and BHSD strides", "[gpu][forward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::vector<Case> cases;
  for (int d : {72, 80, 96, 160, 256}) cases.push_back(Case::of(make_spec(DType::bf16, d, d, "causal"), 203, 113, 2, 2, 2));
  cases.push_back(Case::of(make_spec(DType::f16, 192, 128, "none"), 113, 203, 1, 2, 2));     // d_qk != d_v
  cases.push_back(Case::of(make_spec(DType::bf16, 128, 128, "causal"), 257, 257, 2, 8, 1));  // GQA 8:1
  cases.push_back(Case::of(make_spec(DType::f16, 64, 64, "none"), 1023, 1024, 1, 4, 1));     // MQA
  cases.push_back(Case::of(make_spec(DType::bf16, 64, 64, "causal"), 300, 333, 2, 4, 2, /*bhsd=*/true));
  cases.push_back(Case::of(make_spec(DType::f16, 128, 128, "none"), 1, 4096, 3, 2, 2));      // decode-like
  for (const Case& c : cases) {
    ref::Verdict v = run_case(rt, c, seed++);
    INFO(c.spec.canonical() << v.message);
    CHECK(v.ok);
  }
}

TEST_CASE("gpu forward: over 48 KB of shared memory (opt-in attribute) and non-default tiles", "[gpu][forward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  Case c;
  c.spec = make_spec(DType::bf16, 256, 256, "causal");
  c.seq_q = c.seq_kv = 333;
  c.config = TileConfig{64, 64, 4, 3};  // Q 32 KB + 3 stages × 64 KB of K/V: 224 KB
  ref::Verdict v = run_case(rt, c, 11);
  INFO(v.message);
  CHECK(v.ok);
  Case small;
  small.spec = make_spec(DType::f16, 64, 64, "none");
  small.seq_q = 77;
  small.seq_kv = 301;
  small.config = TileConfig{16, 32, 1, 1};  // one warp, no pipelining
  ref::Verdict w = run_case(rt, small, 12);
  INFO(w.message);
  CHECK(w.ok);
  Case wide;
  wide.spec = make_spec(DType::bf16, 128, 128, "causal");
  wide.seq_q = 1000;
  wide.seq_kv = 1000;
  wide.config = TileConfig{128, 128, 8, 2};  // 8 warps, 128-key tiles
  ref::Verdict x = run_case(rt, wide, 14);
  INFO(x.message);
  CHECK(x.ok);
  // Two 16-row m-tiles per warp share every K and V fragment.
  for (TileConfig two : {TileConfig{128, 32, 4, 2}, TileConfig{64, 64, 2, 3}}) {
    Case c2;
    c2.spec = make_spec(DType::f16, 96, 96, "causal_br");
    c2.seq_q = 555;
    c2.seq_kv = 1000;
    c2.config = two;
    ref::Verdict y = run_case(rt, c2, 16);
    INFO(two.str() << " " << y.message);
    CHECK(y.ok);
  }
}

TEST_CASE("gpu forward: rows with no visible key give O = 0 and LSE = -inf and never NaN", "[gpu][forward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  Case c;
  c.spec = make_spec(DType::bf16, 64, 64, "causal");
  c.seq_q = 70;
  c.seq_kv = 0;  // every row fully masked
  ref::Verdict v = run_case(rt, c, 13);
  INFO(v.message);
  CHECK(v.ok);
  CHECK(v.nan_count == 0);
  // Bottom-right causal with seq_q > seq_kv: the first seq_q − seq_kv rows see no key.
  Case br;
  br.spec = make_spec(DType::f16, 128, 128, "causal_br");
  br.seq_q = 300;
  br.seq_kv = 100;
  ref::Verdict w = run_case(rt, br, 15);
  INFO(w.message);
  CHECK(w.ok);
}

// The lazy rescale (ForwardPlan::grow_at: d = 256 with 128-key tiles) keeps a row's max until a
// tile raises it past 2^8. Random scores settle their max in the first tile, so these push it up
// across the walk: a key ramp that raises it every few tiles or every tile, one that never does,
// and a scale of 1 whose outliers move it at random tiles.
TEST_CASE("gpu forward: d=256 lazy rescale, with a row max that grows across the key tiles", "[gpu][forward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::vector<Case> cases;
  cases.push_back(Case::of(make_spec(DType::bf16, 256, 256, "none", "score + 0.02 * kv"), 1000, 1000, 1, 2, 2));
  cases.push_back(Case::of(make_spec(DType::bf16, 256, 256, "causal", "score + 0.1 * kv"), 777, 777, 1, 2, 2));
  cases.push_back(Case::of(make_spec(DType::f16, 256, 256, "none", "score - 0.02 * kv"), 1000, 1000, 1, 2, 2));
  for (Case& c : cases) c.config = TileConfig{128, 128, 8, 1};
  Case big = Case::of(make_spec(DType::bf16, 256, 256, "none"), 2048, 2048, 1, 2, 2);  // the heuristic's kernel
  big.scale = 1.f;
  cases.push_back(big);
  for (const Case& c : cases) {
    ref::Verdict v = run_case(rt, c, seed++);
    INFO(c.spec.canonical() << " scale " << c.scale << ": " << v.message);
    CHECK(v.ok);
    CHECK(v.nan_count == 0);
  }
}

// The same rescale on the unmasked walks of d = 64's 96-key and d = 128's 176-key tiles, which
// take no score modifier to ramp the max: a scale of 1 lets outlier keys raise it past 2^8 at
// random tiles of a walk of 12–22 tiles. 2 × 16 heads give enough query tiles that no launch
// splits the keys, which would take another tile.
TEST_CASE("gpu forward: lazy rescale on unmasked 96- and 176-key walks, scale 1", "[gpu][forward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  if (rt.device().arch() != "sm_90a") SKIP_TEST("96- and 176-key tiles are built for wgmma only");
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  const struct {
    DType dtype;
    int d, block_n;
    int64_t seq;
  } cases[] = {{DType::bf16, 64, 96, 2048},
               {DType::f16, 64, 96, 1111},
               {DType::bf16, 128, 176, 2048},
               {DType::f16, 128, 176, 2100}};
  for (const auto& k : cases) {
    Case c = Case::of(make_spec(k.dtype, k.d, k.d, "none"), k.seq, k.seq, 2, 16, 16);
    c.config = TileConfig{128, k.block_n, 8, 2};
    c.scale = 1.f;
    INFO("d " << k.d << " block_n " << k.block_n << " seq " << k.seq);
    CompileOptions opts;
    opts.config = c.config;
    Kernel kernel = rt.compile(c.spec, opts);
    CHECK_THAT(kernel.compiled().description, Catch::Contains("+lazy-rescale"));
    std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, seed);
    const std::string launch = kernel.describe_launch(dp->args);
    CHECK_THAT(launch, Catch::Contains("config " + c.config->str()) && !Catch::Contains("split-KV"));
    const ref::Verdict v = run_case(rt, c, seed++);
    INFO(v.message);
    CHECK(v.ok);
    CHECK(v.nan_count == 0);
  }
}

// Autotune off at d = 64: masked walks over at most 1024 keys run the short-walk row (64 × 64),
// longer and unmasked ones the table's 96-key tile; each is checked against the fp64 reference.
// 2 × 16 heads give at least 256 query tiles, enough CTAs that no launch splits the keys (a
// split-KV form takes a tile of its own).
TEST_CASE("gpu forward: d=64 short masked walks take the short-walk row, long ones 96-key tiles", "[gpu][forward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  const ShapeRow rows[] = {{"causal", 1000, "bm64_bn64_w4_s2"},
                           {"causal", 1024, "bm64_bn64_w4_s2"},
                           {"causal", 1025, "bm128_bn96_w8_s2"},
                           {"causal", 1536, "bm128_bn96_w8_s2"},
                           {"none", 1000, "bm128_bn96_w8_s2"}};
  uint64_t seed = 21;
  for (const ShapeRow& r : rows) {
    const Case c = check_shape_row(rt, 64, 16, r, "bm64_bn64_w4_s2", "short-walk heuristic", seed);
    const ref::Verdict v = run_case(rt, c, seed++);
    INFO(r.mask << " seq " << r.seq << ": " << v.message);
    CHECK(v.ok);
  }
}

TEST_CASE("gpu forward: d=128 unmasked walks over more than 8192 keys take 176-key tiles", "[gpu][forward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  const bool wgmma = rt.device().arch() == "sm_90a";  // the 176-key tile is the wgmma producer's
  // The kernel, given: partial last key tiles, a walk of one tile, GQA, a mask, fp16, more tiles than SMs.
  const struct {
    DType dtype;
    const char* mask;
    int64_t seq_q, seq_kv, batch, heads, heads_kv;
  } given[] = {{DType::bf16, "none", 1000, 1000, 2, 3, 3}, {DType::bf16, "none", 17, 17, 3, 2, 2},
               {DType::bf16, "none", 300, 1000, 2, 8, 2},  {DType::f16, "none", 777, 2000, 1, 4, 4},
               {DType::bf16, "causal", 777, 777, 2, 3, 3}, {DType::bf16, "none", 2048, 2048, 2, 8, 8}};
  uint64_t seed = 31;
  if (wgmma)
    for (const auto& g : given) {
      Case c = Case::of(make_spec(g.dtype, 128, 128, g.mask), g.seq_q, g.seq_kv, g.batch, g.heads, g.heads_kv);
      c.config = TileConfig{128, 176, 8, 2};
      const ref::Verdict v = run_case(rt, c, seed++);
      INFO(g.mask << " " << g.seq_q << " x " << g.seq_kv << ": " << v.message);
      CHECK(v.ok);
    }
  // The row, with autotune off: past 8192 keys, unmasked only. 2 × 2 heads of 65 query tiles fill the
  // SMs, so no launch here splits its keys (a split-KV form takes a tile of its own).
  const ShapeRow rows[] = {
      {"none", 8192, "bm128_bn128_w8_s2"}, {"none", 8193, "bm128_bn176_w8_s2"}, {"causal", 8193, "bm128_bn128_w8_s2"}};
  for (const ShapeRow& r : rows) check_shape_row(rt, 128, 2, r, "bm128_bn176_w8_s2", "long-walk heuristic", seed++);
}

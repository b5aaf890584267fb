// Split-KV's host side: the automatic split count (runtime/split_kv.cpp, FlashAttention-2's rule)
// the check of ForwardArgs::num_splits, the shape rows' configs, the grid's query tiles, and
// the combine's equations on host data. The kernels are tested on the GPU
// (tests/test_gpu_split_kv.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "compiler/analyzed_spec.hpp"
#include "flashjit/reference.hpp"
#include "runtime/launch.hpp"
#include "runtime/split_kv.hpp"
#include "templates/fwd/plan.hpp"
#include "tests/internal/launch_args.hpp"

using namespace flashjit;
using rt::auto_splits;

namespace {

// The analysed spec of the shape rows' tests: head dims, mask and score (AttentionSpec's defaults:
// no mask, the plain score).
AnalyzedSpecPtr row_spec(int d_qk, int d_v, const std::string& mask = "none", const std::string& score = "score") {
  AttentionSpec s;
  s.head_dim_qk = d_qk;
  s.head_dim_v = d_v;
  s.mask = mask;
  s.score = score;
  return analyze_spec(s);
}

}  // namespace

TEST_CASE("split-KV: a launch that fills the GPU is never split", "[split]") {
  // 64 sequences × 32 heads × 1 query tile = 2048 CTAs on 132 SMs.
  CHECK(auto_splits({2048, 256, 132, 1}) == 1);
  // 80% of the CTA slots is enough: 106 of 132.
  CHECK(auto_splits({106, 256, 132, 1}) == 1);
  CHECK(auto_splits({105, 256, 132, 1}) > 1);
  // With two CTAs per SM the slots double: 132 CTAs fill only half of 264.
  CHECK(auto_splits({132, 256, 132, 2}) > 1);
}

TEST_CASE("split-KV: decode splits to fill the SMs, bounded by the key tiles and 128", "[split]") {
  // One sequence, 32 heads: 32 CTAs; 4 splits make 128 of 132 slots (97%).
  CHECK(auto_splits({32, 256, 132, 1}) == 4);
  // 8 heads: 14 splits make 112 CTAs (85% of the slots), the fewest within 85% of the best
  // candidate's 97% (16 splits: 128 CTAs).
  CHECK(auto_splits({8, 256, 132, 1}) == 14);
  // One CTA: as many splits as fill the slots well, never more than 128.
  const int one = auto_splits({1, 100000, 132, 1});
  CHECK(one > 64);
  CHECK(one <= 128);
  // Never more splits than key tiles: each split walks at least one.
  CHECK(auto_splits({1, 3, 132, 1}) <= 3);
  CHECK(auto_splits({1, 1, 132, 1}) == 1);
  CHECK(auto_splits({4, 0, 132, 1}) == 1);
  // Unknown occupancy counts as one CTA per SM.
  CHECK(auto_splits({32, 256, 132, 0}) == auto_splits({32, 256, 132, 1}));
}

TEST_CASE("split-KV: every automatic count is in range and shortens the longest split", "[split]") {
  for (int64_t ctas : {1, 2, 3, 7, 16, 33, 64, 100})
    for (int64_t tiles : {1, 2, 5, 17, 64, 255, 4096})
      for (int occupancy : {1, 2, 3}) {
        const int s = auto_splits({ctas, tiles, 132, occupancy});
        INFO("ctas " << ctas << " tiles " << tiles << " occupancy " << occupancy << " → " << s);
        CHECK(s >= 1);
        CHECK(s <= 128);
        CHECK(s <= std::max<int64_t>(tiles, 1));
        if (s > 1) CHECK((tiles + s - 1) / s != (tiles + s - 2) / (s - 1));
      }
}

TEST_CASE("split-KV: num_splits outside 0..128 is a usage error naming it", "[split]") {
  AttentionSpec s;
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = 64;
  ForwardArgs a;
  a.batch = 1, a.heads_q = a.heads_kv = 1, a.seq_q = 1, a.seq_kv = 128;
  a.q = a.k = a.v = a.o = test::aliasing_tensor();
  for (int bad : {-1, 129, 1000}) {
    a.num_splits = bad;
    rt::ForwardLaunch launch;
    try {
      rt::pack_forward(*analyze_spec(s), a, launch);
      FAIL("num_splits " << bad << " was accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::usage);
      CHECK_THAT(e.what(), Catch::Contains("num_splits is " + std::to_string(bad)) && Catch::Contains("2..128"));
    }
  }
  for (int good : {0, 1, 2, 128}) {
    a.num_splits = good;
    rt::ForwardLaunch launch;
    CHECK_NOTHROW(rt::pack_forward(*analyze_spec(s), a, launch));
    CHECK(launch.fixed.num_splits == 1);  // Kernel::forward sets the split it launches
  }
}

TEST_CASE("split-KV: the grid counts the launched module's query tiles, not the bucket's", "[split]") {
  // The split kernel covers rows [0, grid_x / splits · block_m) of its own block_m. A bucket of
  // 128-row tiles whose split form got the heuristic's 64-row tiles (KernelDispatch::variant)
  // needs 16 tiles for 1000 rows: a grid of the bucket's 8 left rows 512..999 unwritten.
  const TileConfig bucket{128, 128, 8, 2}, launched{64, 128, 4, 2};
  CHECK(rt::query_tiles(1000, 1, bucket) == 8);
  CHECK(rt::query_tiles(1000, 1, launched) == 16);
  for (int64_t rows : {1, 17, 63, 64, 65, 777, 1000, 4096})
    for (int64_t group : {1, 4})
      for (const TileConfig& c : {bucket, launched}) {
        const int64_t tiles = rt::query_tiles(rows, group, c);
        INFO(rows << " rows, group " << group << ", block_m " << c.block_m);
        CHECK(tiles * c.block_m >= rows * group);       // every (packed) row has a tile
        CHECK((tiles - 1) * c.block_m < rows * group);  // and no tile is empty
      }
}

namespace {

// The combine kernel's equations (templates/fwd/combine.cpp) in fp64: m = max_s LSE_s (a row whose
// splits are all empty keeps LSE −inf and O = 0), w_s = e^{LSE_s − m}, LSE = m + ln Σ w_s,
// O = Σ_s (w_s / Σ w) · O_s.
ref::Rows combine_host(const std::vector<ref::Rows>& parts, size_t rows, size_t d_v) {
  ref::Rows out{std::vector<double>(rows * d_v, 0.0), std::vector<double>(rows, -INFINITY)};
  for (size_t r = 0; r < rows; ++r) {
    double m = -INFINITY;
    for (const ref::Rows& p : parts) m = std::max(m, p.lse[r]);
    if (!(m > -INFINITY)) continue;
    double total = 0;
    for (const ref::Rows& p : parts) total += std::exp(p.lse[r] - m);
    out.lse[r] = m + std::log(total);
    for (const ref::Rows& p : parts)
      for (size_t c = 0; c < d_v; ++c) out.o[r * d_v + c] += std::exp(p.lse[r] - m) / total * p.o[r * d_v + c];
  }
  return out;
}

}  // namespace

TEST_CASE("split-KV: the combine's equations merge key ranges into the unsplit answer", "[split]") {
  // Each split is the fp64 reference on a key range (the mask narrowed to lo <= kv < hi); merged,
  // they must give the unsplit reference: splits that see no key (causal's early rows, a range
  // the mask empties) and rows no split sees are the cases that break a careless merge.
  ref::Problem p;
  p.spec.dtype = DType::bf16;
  p.spec.head_dim_qk = p.spec.head_dim_v = 16;
  p.batch = 1, p.heads_q = p.heads_kv = 2, p.seq_q = 9, p.seq_kv = 37;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (auto* t : {&p.q, &p.k, &p.v}) {
    t->resize(size_t((t == &p.q ? p.seq_q : p.seq_kv) * p.heads_q * 16));
    for (auto& x : *t) x = ref::to_half_bits(normal(rng), DType::bf16);
  }
  std::vector<ref::RowId> rows;
  for (int64_t h = 0; h < p.heads_q; ++h)
    for (int64_t q = 0; q < p.seq_q; ++q) rows.push_back({0, h, q});
  for (const char* mask : {"none", "causal", "causal_br", "kv >= 20 && q < 6", "kv < 0"})
    for (int splits : {1, 2, 3, 7, 37}) {
      p.spec.mask = mask;
      const ref::Rows whole = ref::attention_fp64(p, rows);
      std::vector<ref::Rows> parts;
      for (int s = 0; s < splits; ++s) {
        ref::Problem part = p;
        const int64_t lo = s * p.seq_kv / splits, hi = (s + 1) * p.seq_kv / splits;
        part.spec.mask = "(" + std::string(mask == std::string("none") ? "true" : mask) + ") && kv >= " +
                         std::to_string(lo) + " && kv < " + std::to_string(hi);
        parts.push_back(ref::attention_fp64(part, rows));
      }
      const ref::Rows merged = combine_host(parts, rows.size(), 16);
      INFO(mask << ", " << splits << " splits");
      for (size_t r = 0; r < rows.size(); ++r) {
        INFO("row " << r);
        if (std::isinf(whole.lse[r])) {
          CHECK(std::isinf(merged.lse[r]));
          CHECK(merged.lse[r] < 0);
        } else {
          CHECK(merged.lse[r] == Approx(whole.lse[r]).epsilon(1e-12));
        }
        for (size_t c = 0; c < 16; ++c) {
          REQUIRE_FALSE(std::isnan(merged.o[r * 16 + c]));
          CHECK(std::abs(merged.o[r * 16 + c] - whole.o[r * 16 + c]) <= 1e-12);
        }
      }
    }
}

TEST_CASE("split-KV: with autotune off, decode shapes at 64 < d <= 128 take one warpgroup of 64 rows", "[split]") {
  const Target sm90{"sm_90a"}, sm80{"sm_80"};
  Target sync = sm90;
  sync.allow_wgmma = false;
  std::string why;
  for (int d : {72, 96, 128})
    for (int64_t rows : {1, 4, 16, 64}) {
      INFO("d=" << d << " rows " << rows);
      const std::optional<TileConfig> c = forward_shape_heuristic(*row_spec(d, d), sm90, rows, 8192, &why);
      REQUIRE(c);
      CHECK(c->str() == "bm64_bn128_w4_s2");  // the table's 128-key tiles and stages, 4 warps
      CHECK_THAT(why, Catch::Contains("decode heuristic") && Catch::Contains("at most 64 query rows"));
    }
  CHECK_FALSE(
      forward_shape_heuristic(*row_spec(128, 128), sm90, 65, 8192, nullptr));  // more than a tile of rows: the table
  // d = 64: the table's 128 × 96 tile shares K/V between 128 rows; decode keeps 64 × 128.
  REQUIRE(forward_shape_heuristic(*row_spec(64, 64), sm90, 1, 8192, nullptr));
  CHECK(forward_shape_heuristic(*row_spec(64, 64), sm90, 1, 8192, nullptr)->str() == "bm64_bn128_w4_s2");
  CHECK_FALSE(forward_shape_heuristic(*row_spec(32, 32), sm90, 1, 8192, nullptr));    // the table's row has 64 already
  CHECK_FALSE(forward_shape_heuristic(*row_spec(256, 256), sm90, 1, 8192, nullptr));  // not measured there
  CHECK_FALSE(forward_shape_heuristic(*row_spec(128, 128), sm80, 1, 8192, nullptr));  // mma.sync: the table
  CHECK_FALSE(forward_shape_heuristic(*row_spec(128, 128), sync, 1, 8192, nullptr));
}

TEST_CASE("forward: with autotune off, masked walks over at most 1024 keys leave d = 64's 96-key tiles", "[split]") {
  const Target sm90{"sm_90a"};
  std::string why;
  REQUIRE(forward_heuristic(*row_spec(64, 64, "causal"), sm90, nullptr).str() == "bm128_bn96_w8_s2");
  for (const char* mask : {"causal", "causal_br", "window(2047, 0)"})
    for (int64_t keys : {17, 1000, 1024}) {
      INFO(mask << ", " << keys << " keys");
      const std::optional<TileConfig> c = forward_shape_heuristic(*row_spec(64, 64, mask), sm90, 1024, keys, &why);
      REQUIRE(c);
      CHECK(c->str() == "bm64_bn64_w4_s2");
      CHECK_THAT(why, Catch::Contains("short-walk heuristic") && Catch::Contains("at most 1024 keys"));
    }
  for (int64_t keys : {1025, 1536})  // longer: the table's 96 keys
    CHECK_FALSE(forward_shape_heuristic(*row_spec(64, 64, "causal"), sm90, keys, keys, nullptr));
  CHECK_FALSE(
      forward_shape_heuristic(*row_spec(64, 64, "none"), sm90, 1024, 1024, nullptr));  // unmasked: 96 keys (+1%)
  // Where the table has no 96-key tile, the row is the table's: d = 128, and d = 64's short windows.
  CHECK_FALSE(forward_shape_heuristic(*row_spec(128, 128, "causal"), sm90, 1024, 1024, nullptr));
  CHECK_FALSE(forward_shape_heuristic(*row_spec(64, 64, "window(255, 0)"), sm90, 1024, 1024, nullptr));
}

TEST_CASE("forward: with autotune off, unmasked walks over more than 8192 keys at d = 128 take 176-key tiles",
          "[split]") {
  const Target sm90{"sm_90a"};
  std::string why;
  for (int64_t keys : {8193, 16384, 131072}) {
    INFO(keys << " keys");
    const std::optional<TileConfig> c = forward_shape_heuristic(*row_spec(128, 128, "none"), sm90, 4096, keys, &why);
    REQUIRE(c);
    CHECK(c->str() == "bm128_bn176_w8_s2");
    CHECK_THAT(why, Catch::Contains("long-walk heuristic") && Catch::Contains("more than 8192 keys"));
  }
  CHECK_FALSE(forward_shape_heuristic(*row_spec(128, 128, "none"), sm90, 4096, 8192, nullptr));  // 8k: the table's tile
  // Decode keeps its own row, whatever the walk's length.
  REQUIRE(forward_shape_heuristic(*row_spec(128, 128, "none"), sm90, 64, 16384, nullptr));
  CHECK(forward_shape_heuristic(*row_spec(128, 128, "none"), sm90, 64, 16384, nullptr)->str() == "bm64_bn128_w4_s2");
  // Not measured, or not the producer kernel's form: the table.
  CHECK_FALSE(forward_shape_heuristic(*row_spec(128, 128, "causal"), sm90, 16384, 16384, nullptr));
  CHECK_FALSE(
      forward_shape_heuristic(*row_spec(128, 128, "none", "30 * tanh(score / 30)"), sm90, 16384, 16384, nullptr));
  CHECK_FALSE(forward_shape_heuristic(*row_spec(128, 64, "none"), sm90, 16384, 16384, nullptr));
  CHECK_FALSE(forward_shape_heuristic(*row_spec(64, 64, "none"), sm90, 16384, 16384, nullptr));
  CHECK_FALSE(forward_shape_heuristic(*row_spec(256, 256, "none"), sm90, 16384, 16384, nullptr));
  Target split = sm90, packed = sm90, no_tma = sm90, driver = sm90;
  split.split_kv = true;
  packed.pack_gqa = 4;
  no_tma.tma = false;
  driver.moves_registers = false;
  for (const Target& t : {split, packed, no_tma, driver, Target{"sm_80"}})
    CHECK_FALSE(forward_shape_heuristic(*row_spec(128, 128, "none"), t, 16384, 16384, nullptr));
}

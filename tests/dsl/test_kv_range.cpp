// Closed-form kv ranges (what kernels compute instead of reading a block mask).
#include <catch2/catch.hpp>

#include "compiler/dsl/kv_range.hpp"
#include "helpers.hpp"

using namespace flashjit::dsl;
using namespace flashjit::dsl::test;

namespace {

SymbolValues values_of(const World& w) {
  SymbolValues v;
  v.b = w.b;
  v.h = w.h;
  v.h_kv = w.h_kv;
  v.seq_q = w.seq_q;
  v.seq_kv = w.seq_kv;
  for (const auto& p : w.params) v.params.push_back(p);
  return v;
}

// A tile runs along one sequence and its range along the other: the forward's query tiles get
// key ranges, the backward's key tiles get query ranges.
enum class Along { queries, keys };

bool visible(const ExprPtr& m, const World& w, Along along, int64_t tile_pos, int64_t range_pos) {
  const int64_t q = along == Along::queries ? tile_pos : range_pos;
  const int64_t kv = along == Along::queries ? range_pos : tile_pos;
  return eval_mask(*m, w.env(static_cast<int32_t>(q), static_cast<int32_t>(kv)));
}

// Checks the two promises of TileKvRange for the tile [t0, t1): every visible element's other
// position is in [visit_lo, visit_hi), and every position in [full_lo, full_hi) is visible from
// every position of the tile.
void check_range(const ExprPtr& m, const std::string& text, const World& w, Along along, const TileKvRange& r,
                 int64_t t0, int64_t t1) {
  const int64_t other = along == Along::queries ? w.seq_kv : w.seq_q;
  INFO(text << (along == Along::queries ? " q[" : " kv[") << t0 << "," << t1 << ") seq " << w.seq_q << "x" << w.seq_kv
            << " visit [" << r.visit_lo << "," << r.visit_hi << ") full [" << r.full_lo << "," << r.full_hi << ")");
  REQUIRE(r.visit_lo >= 0);
  REQUIRE(r.visit_hi <= other);
  REQUIRE(r.full_lo <= r.full_hi);
  if (r.full_lo < r.full_hi && along == Along::queries) {
    REQUIRE(r.full_lo >= r.visit_lo);
    REQUIRE(r.full_hi <= r.visit_hi);
  }
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t o = 0; o < other; ++o) {
      bool v = visible(m, w, along, t, o);
      if (v) REQUIRE((o >= r.visit_lo && o < r.visit_hi));
      if (o >= r.full_lo && o < r.full_hi) REQUIRE(v);
    }
}

// For single-band masks the range is tight: visit is the hull of the positions visible from any
// of the tile, full exactly those visible from all of it (`check_full` false: a multi-band mask's
// full range is its widest band, not their union).
void check_tight(const ExprPtr& m, const std::string& text, const World& w, Along along, const TileKvRange& r,
                 int64_t t0, int64_t t1, bool check_full = true) {
  const int64_t other = along == Along::queries ? w.seq_kv : w.seq_q;
  int64_t lo = INT64_MAX, hi = -1, flo = -1, fhi = -1;
  for (int64_t o = 0; o < other; ++o) {
    bool any = false, all = true;
    for (int64_t t = t0; t < t1; ++t) {
      bool v = visible(m, w, along, t, o);
      any |= v;
      all &= v;
    }
    if (any) { lo = std::min(lo, o); hi = o + 1; }
    if (all) { if (flo < 0) flo = o; fhi = o + 1; }
  }
  INFO(text << (along == Along::queries ? " q[" : " kv[") << t0 << "," << t1 << ") seq " << w.seq_q << "x" << w.seq_kv);
  if (hi < 0) {
    CHECK(r.visit_lo == r.visit_hi);
  } else {
    CHECK(r.visit_lo == lo);
    CHECK(r.visit_hi == hi);
  }
  if (!check_full) return;
  if (fhi < 0) CHECK(r.full_lo == r.full_hi);
  else CHECK((r.full_lo == flo && r.full_hi == fhi));
}

// A random tile of up to 32 positions along a sequence of `seq`.
std::pair<int64_t, int64_t> random_tile(std::mt19937& rng, int32_t seq) {
  const int size = 1 << rand_int(rng, 0, 5);
  const int64_t t0 = static_cast<int64_t>(rand_int(rng, 0, (seq - 1) / size)) * size;
  return {t0, std::min<int64_t>(seq, t0 + size)};
}

}  // namespace

TEST_CASE("kv ranges are sound for random masks", "[dsl][kv_range][property]") {
  std::mt19937 rng(4242);
  const Decls d = Decls::standard();
  for (int i = 0; i < 1500; ++i) {
    std::string text = random_mask(rng, i % 2 == 0, rand_int(rng, 1, 4));
    ExprPtr m = compile(text, d, ExprRole::Mask);
    KvRange kr = derive_kv_range(m, &d.tensors);
    World w = random_world(d, rng, 80);
    for (int j = 0; j < 3; ++j) {
      auto [q0, q1] = random_tile(rng, w.seq_q);
      check_range(m, text, w, Along::queries, eval_kv_range(kr, q0, q1, values_of(w)), q0, q1);
    }
  }
}

TEST_CASE("kv ranges of the shorthands are tight", "[dsl][kv_range]") {
  // For single-band masks, visit is the hull of the visible keys and full is exactly the
  // keys visible from every row: nothing a kernel could skip is visited.
  const Decls d = Decls::standard();
  const char* masks[] = {"causal", "causal_br", "window(w, n)", "prefix(n)", "causal && window(w, 0)", "causal && q - kv < w",
                         "causal_br && window(n, 0)"};
  std::mt19937 rng(5);
  for (const char* text : masks) {
    ExprPtr m = compile(text, d, ExprRole::Mask);
    KvRange kr = derive_kv_range(m, &d.tensors);
    REQUIRE(kr.exact);
    for (int i = 0; i < 200; ++i) {
      World w = random_world(d, rng, 150);
      w.params[1] = Value::of_i32(rand_int(rng, 0, 60));  // n
      w.params[3] = Value::of_i32(rand_int(rng, 0, 60));  // w
      auto [q0, q1] = random_tile(rng, w.seq_q);
      TileKvRange r = eval_kv_range(kr, q0, q1, values_of(w));
      check_range(m, text, w, Along::queries, r, q0, q1);
      check_tight(m, text, w, Along::queries, r, q0, q1);
    }
  }
}

TEST_CASE("kv range forms read like the mask", "[dsl][kv_range]") {
  const Decls d = Decls::standard();
  KvRange sw = derive_kv_range(compile("causal && q - kv < w", d, ExprRole::Mask));
  REQUIRE(sw.visit.size() == 1);
  REQUIRE(sw.visit[0].lower.size() == 1);
  REQUIRE(sw.visit[0].upper.size() == 1);
  CHECK(sw.visit[0].lower[0].to_string(&d.params) == "q - w + 1");
  CHECK(sw.visit[0].upper[0].to_string(&d.params) == "q");
  KvRange doc = derive_kv_range(compile("causal && document(doc)", d, ExprRole::Mask), &d.tensors);
  CHECK_FALSE(doc.exact);
  CHECK(doc.full.empty());
  REQUIRE(doc.visit.size() == 1);
  CHECK(doc.visit[0].upper[0].to_string() == "q");
}

TEST_CASE("a possible i32 overflow makes the kv range conservative", "[dsl][kv_range]") {
  const Decls d = Decls::standard();
  ExprPtr m = compile("kv <= q + w", d, ExprRole::Mask);
  KvRange kr = derive_kv_range(m);
  SymbolValues v;
  v.seq_q = v.seq_kv = 128;
  v.params = {Value::of_i32(0), Value::of_i32(0), Value::of_f32(0), Value::of_i32(INT32_MAX)};
  CHECK(kv_range_may_overflow(kr, v));
  TileKvRange r = eval_kv_range(kr, 64, 128, v);
  CHECK(r.visit_lo == 0);
  CHECK(r.visit_hi == 128);
  CHECK(r.full_lo == r.full_hi);
  v.params[3] = Value::of_i32(4);
  CHECK_FALSE(kv_range_may_overflow(kr, v));
}

TEST_CASE("a band whose width overflows int64 gets its range without the overflow", "[dsl][kv_range]") {
  // Each bound fits int64 (w's coefficient 2 * 2147483647^2 is just under 2^63), but upper - lower
  // does not: the analysis takes differences checked (dsl::difference), so a build with
  // -fsanitize=signed-integer-overflow runs this case clean. At w = 0 no atom wraps in i32 and the
  // band is the diagonal: rows [64, 128) visit keys [64, 128), and no key is full for all of them.
  const Decls d = Decls::standard();
  const std::string c = "w * 2147483647 * 2147483647 * 2";
  KvRange kr = derive_kv_range(compile("kv <= q + " + c + " && kv >= q - " + c, d, ExprRole::Mask));
  SymbolValues v;
  v.seq_q = v.seq_kv = 128;
  v.params = {Value::of_i32(0), Value::of_i32(0), Value::of_f32(0), Value::of_i32(0)};
  REQUIRE_FALSE(kv_range_may_overflow(kr, v));
  TileKvRange r = eval_kv_range(kr, 64, 128, v);
  CHECK(r.visit_lo == 64);
  CHECK(r.visit_hi == 128);
  CHECK(r.full_lo == r.full_hi);
}

TEST_CASE("a constant comparison that wraps in i32 keeps its i32 meaning in the kv range", "[dsl][kv_range]") {
  // 48 - 21474836 * 565 is 751619596 in i32 (the product wraps): the mask is plain causal. Folded
  // in int64 the comparison looked false and every tile would have been skipped.
  const Decls d = Decls::standard();
  KvRange kr = derive_kv_range(compile("kv <= q && 0 < 48 - 21474836 * 565", d, ExprRole::Mask));
  SymbolValues v;
  v.seq_q = v.seq_kv = 128;
  TileKvRange r = eval_kv_range(kr, 64, 128, v);
  CHECK(r.visit_lo == 0);
  CHECK(r.visit_hi == 128);
}

TEST_CASE("q ranges per key tile are sound for random masks", "[dsl][kv_range][property]") {
  std::mt19937 rng(2424);
  const Decls d = Decls::standard();
  for (int i = 0; i < 1500; ++i) {
    std::string text = random_mask(rng, i % 2 == 0, rand_int(rng, 1, 4));
    ExprPtr m = compile(text, d, ExprRole::Mask);
    KvRange qr = derive_q_range(m, &d.tensors);
    World w = random_world(d, rng, 80);
    for (int j = 0; j < 3; ++j) {
      auto [kv0, kv1] = random_tile(rng, w.seq_kv);
      check_range(m, text, w, Along::keys, eval_q_range(qr, kv0, kv1, values_of(w)), kv0, kv1);
    }
  }
}

TEST_CASE("q ranges of the shorthands are tight", "[dsl][kv_range]") {
  // The backward visits no query tile it could skip.
  const Decls d = Decls::standard();
  const char* masks[] = {"causal", "causal_br", "window(w, n)", "prefix(n)", "causal && window(w, 0)",
                         "causal_br && window(n, 0)", "prefix(n) || causal"};
  std::mt19937 rng(6);
  for (const char* text : masks) {
    ExprPtr m = compile(text, d, ExprRole::Mask);
    KvRange qr = derive_q_range(m, &d.tensors);
    REQUIRE(qr.exact);
    for (int i = 0; i < 200; ++i) {
      World w = random_world(d, rng, 150);
      w.params[1] = Value::of_i32(rand_int(rng, 0, 60));  // n
      w.params[3] = Value::of_i32(rand_int(rng, 0, 60));  // w
      auto [kv0, kv1] = random_tile(rng, w.seq_kv);
      TileKvRange r = eval_q_range(qr, kv0, kv1, values_of(w));
      check_range(m, text, w, Along::keys, r, kv0, kv1);
      check_tight(m, text, w, Along::keys, r, kv0, kv1, /*check_full=*/std::string(text) != "prefix(n) || causal");
    }
  }
}

TEST_CASE("q range forms read like the transposed mask", "[dsl][kv_range]") {
  // causal: q >= kv, so per key tile the queries run from the tile's first key to the end.
  const Decls d = Decls::standard();
  KvRange qr = derive_q_range(compile("causal && q - kv < w", d, ExprRole::Mask));
  REQUIRE(qr.visit.size() == 1);
  REQUIRE(qr.visit[0].lower.size() == 1);
  REQUIRE(qr.visit[0].upper.size() == 1);
  // In the transposed form, q stands for the key and kv for the query.
  CHECK(qr.visit[0].lower[0].to_string(&d.params) == "q");
  CHECK(qr.visit[0].upper[0].to_string(&d.params) == "q + w - 1");
}

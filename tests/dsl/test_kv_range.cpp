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

// Checks the two promises of TileKvRange against every element of the query tile.
void check_tile(const ExprPtr& m, const std::string& text, const World& w, const TileKvRange& r, int64_t q0, int64_t q1) {
  INFO(text << " q[" << q0 << "," << q1 << ") seq " << w.seq_q << "x" << w.seq_kv << " visit [" << r.visit_lo << ","
            << r.visit_hi << ") full [" << r.full_lo << "," << r.full_hi << ")");
  REQUIRE(r.visit_lo >= 0);
  REQUIRE(r.visit_hi <= w.seq_kv);
  REQUIRE(r.full_lo <= r.full_hi);
  if (r.full_lo < r.full_hi) {
    REQUIRE(r.full_lo >= r.visit_lo);
    REQUIRE(r.full_hi <= r.visit_hi);
  }
  for (int64_t q = q0; q < q1; ++q)
    for (int64_t kv = 0; kv < w.seq_kv; ++kv) {
      bool v = eval_mask(*m, w.env(static_cast<int32_t>(q), static_cast<int32_t>(kv)));
      if (v) REQUIRE((kv >= r.visit_lo && kv < r.visit_hi));
      if (kv >= r.full_lo && kv < r.full_hi) REQUIRE(v);
    }
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
      int bm = 1 << rand_int(rng, 0, 5);
      int64_t q0 = static_cast<int64_t>(rand_int(rng, 0, (w.seq_q - 1) / bm)) * bm;
      int64_t q1 = std::min<int64_t>(w.seq_q, q0 + bm);
      check_tile(m, text, w, eval_kv_range(kr, q0, q1, values_of(w)), q0, q1);
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
      int bm = 1 << rand_int(rng, 0, 5);
      int64_t q0 = static_cast<int64_t>(rand_int(rng, 0, (w.seq_q - 1) / bm)) * bm;
      int64_t q1 = std::min<int64_t>(w.seq_q, q0 + bm);
      TileKvRange r = eval_kv_range(kr, q0, q1, values_of(w));
      check_tile(m, text, w, r, q0, q1);
      int64_t lo = INT64_MAX, hi = -1, flo = -1, fhi = -1;
      for (int64_t kv = 0; kv < w.seq_kv; ++kv) {
        bool any = false, all = true;
        for (int64_t q = q0; q < q1; ++q) {
          bool v = eval_mask(*m, w.env(static_cast<int32_t>(q), static_cast<int32_t>(kv)));
          any |= v;
          all &= v;
        }
        if (any) { lo = std::min(lo, kv); hi = kv + 1; }
        if (all) { if (flo < 0) flo = kv; fhi = kv + 1; }
      }
      INFO(text << " q[" << q0 << "," << q1 << ")");
      if (hi < 0) {
        CHECK(r.visit_lo == r.visit_hi);
      } else {
        CHECK(r.visit_lo == lo);
        CHECK(r.visit_hi == hi);
      }
      if (fhi < 0) CHECK(r.full_lo == r.full_hi);
      else CHECK((r.full_lo == flo && r.full_hi == fhi));
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

namespace {

// TileKvRange's promises transposed: for the key tile [kv0, kv1), every query that sees a key of
// it is in [visit_lo, visit_hi), and every query in [full_lo, full_hi) sees every key of it.
void check_key_tile(const ExprPtr& m, const std::string& text, const World& w, const TileKvRange& r, int64_t kv0,
                    int64_t kv1) {
  INFO(text << " kv[" << kv0 << "," << kv1 << ") seq " << w.seq_q << "x" << w.seq_kv << " visit q [" << r.visit_lo
            << "," << r.visit_hi << ") full q [" << r.full_lo << "," << r.full_hi << ")");
  REQUIRE(r.visit_lo >= 0);
  REQUIRE(r.visit_hi <= w.seq_q);
  REQUIRE(r.full_lo <= r.full_hi);
  for (int64_t q = 0; q < w.seq_q; ++q)
    for (int64_t kv = kv0; kv < kv1; ++kv) {
      bool v = eval_mask(*m, w.env(static_cast<int32_t>(q), static_cast<int32_t>(kv)));
      if (v) REQUIRE((q >= r.visit_lo && q < r.visit_hi));
      if (q >= r.full_lo && q < r.full_hi) REQUIRE(v);
    }
}

}  // namespace

TEST_CASE("q ranges per key tile are sound for random masks", "[dsl][kv_range][property]") {
  std::mt19937 rng(2424);
  const Decls d = Decls::standard();
  for (int i = 0; i < 1500; ++i) {
    std::string text = random_mask(rng, i % 2 == 0, rand_int(rng, 1, 4));
    ExprPtr m = compile(text, d, ExprRole::Mask);
    KvRange qr = derive_q_range(m, &d.tensors);
    World w = random_world(d, rng, 80);
    for (int j = 0; j < 3; ++j) {
      int bn = 1 << rand_int(rng, 0, 5);
      int64_t kv0 = static_cast<int64_t>(rand_int(rng, 0, (w.seq_kv - 1) / bn)) * bn;
      int64_t kv1 = std::min<int64_t>(w.seq_kv, kv0 + bn);
      check_key_tile(m, text, w, eval_q_range(qr, kv0, kv1, values_of(w)), kv0, kv1);
    }
  }
}

TEST_CASE("q ranges of the shorthands are tight", "[dsl][kv_range]") {
  // Single-band masks: visit is the hull of the queries that see any key of the tile, full the
  // queries that see all of them (the backward visits no query tile it could skip).
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
      int bn = 1 << rand_int(rng, 0, 5);
      int64_t kv0 = static_cast<int64_t>(rand_int(rng, 0, (w.seq_kv - 1) / bn)) * bn;
      int64_t kv1 = std::min<int64_t>(w.seq_kv, kv0 + bn);
      TileKvRange r = eval_q_range(qr, kv0, kv1, values_of(w));
      check_key_tile(m, text, w, r, kv0, kv1);
      int64_t lo = INT64_MAX, hi = -1, flo = -1, fhi = -1;
      for (int64_t q = 0; q < w.seq_q; ++q) {
        bool any = false, all = true;
        for (int64_t kv = kv0; kv < kv1; ++kv) {
          bool v = eval_mask(*m, w.env(static_cast<int32_t>(q), static_cast<int32_t>(kv)));
          any |= v;
          all &= v;
        }
        if (any) { lo = std::min(lo, q); hi = q + 1; }
        if (all) { if (flo < 0) flo = q; fhi = q + 1; }
      }
      INFO(text << " kv[" << kv0 << "," << kv1 << ") seq " << w.seq_q << "x" << w.seq_kv);
      if (hi < 0) {
        CHECK(r.visit_lo == r.visit_hi);
      } else {
        CHECK(r.visit_lo == lo);
        CHECK(r.visit_hi == hi);
      }
      // prefix(n) || causal is two bands; its full queries are the widest one, not their union.
      if (std::string(text) == "prefix(n) || causal") continue;
      if (fhi < 0) CHECK(r.full_lo == r.full_hi);
      else CHECK((r.full_lo == flo && r.full_hi == fhi));
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

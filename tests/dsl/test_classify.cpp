// Tile classification and interval analysis against brute-force evaluation.
#include <catch2/catch.hpp>

#include "compiler/dsl/classify.hpp"
#include "compiler/dsl/interval.hpp"
#include "helpers.hpp"

using namespace flashjit::dsl;
using namespace flashjit::dsl::test;

namespace {

struct Tile {
  int64_t q0, q1, kv0, kv1;
};

Tile random_tile(std::mt19937& rng, const World& w, int max_side) {
  Tile t;
  t.q0 = rand_int(rng, 0, w.seq_q - 1);
  t.q1 = std::min<int64_t>(w.seq_q, t.q0 + rand_int(rng, 1, max_side));
  t.kv0 = rand_int(rng, 0, w.seq_kv - 1);
  t.kv1 = std::min<int64_t>(w.seq_kv, t.kv0 + rand_int(rng, 1, max_side));
  return t;
}

// Tiles aligned to a block grid, as kernels use them (the grid is where exactness matters).
Tile grid_tile(std::mt19937& rng, const World& w, int bm, int bn) {
  Tile t;
  t.q0 = static_cast<int64_t>(rand_int(rng, 0, (w.seq_q - 1) / bm)) * bm;
  t.q1 = std::min<int64_t>(w.seq_q, t.q0 + bm);
  t.kv0 = static_cast<int64_t>(rand_int(rng, 0, (w.seq_kv - 1) / bn)) * bn;
  t.kv1 = std::min<int64_t>(w.seq_kv, t.kv0 + bn);
  return t;
}

MaskInputs inputs_for(const World& w, const Decls& d, bool know_params, bool know_heads) {
  MaskInputs in;
  in.seq_q = w.seq_q;
  in.seq_kv = w.seq_kv;
  in.tensors = &d.tensors;
  if (know_params)
    for (const auto& v : w.params) in.params.push_back(v);
  if (know_heads) {
    in.b = w.b;
    in.h = w.h;
    in.h_kv = w.h_kv;
  }
  return in;
}

TileClass truth(const Brute& b) { return !b.any ? TileClass::Empty : b.all ? TileClass::Full : TileClass::Partial; }

}  // namespace

TEST_CASE("classification never contradicts brute force on random masks", "[dsl][classify][property]") {
  std::mt19937 rng(20261130);
  const Decls d = Decls::standard();
  int decided = 0, checked = 0;
  for (int i = 0; i < 2500; ++i) {
    const bool affine = i % 3 == 0;
    std::string text = random_mask(rng, affine, rand_int(rng, 1, 4));
    ExprPtr m = compile(text, d, ExprRole::Mask);
    World w = random_world(d, rng, 96);
    for (int j = 0; j < 4; ++j) {
      Tile t = j < 2 ? random_tile(rng, w, 40) : grid_tile(rng, w, 16, 16);
      MaskInputs in = inputs_for(w, d, j != 1, j != 3);
      TileClass c = classify(m, Box{t.q0, t.q1, t.kv0, t.kv1}, in);
      TileClass want = truth(brute_force(*m, w, t.q0, t.q1, t.kv0, t.kv1));
      INFO("mask: " << text << "  tile q[" << t.q0 << "," << t.q1 << ") kv[" << t.kv0 << "," << t.kv1 << ") seq "
                    << w.seq_q << "x" << w.seq_kv << " -> " << tile_class_name(c) << ", truth " << tile_class_name(want));
      if (c != TileClass::Partial) {
        REQUIRE(c == want);
        ++decided;
      }
      ++checked;
    }
  }
  // The analysis must also be useful, not just sound: most tiles of these masks are decided.
  CHECK(decided > checked / 3);
}

TEST_CASE("classification is exact for affine masks with known params", "[dsl][classify][property]") {
  // With every param known and no tensor reads, the row sweep decides every tile exactly
  // (affine masks built from the shorthands and linear comparisons).
  std::mt19937 rng(7);
  const Decls d = Decls::standard();
  int exact = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string text = random_mask(rng, true, rand_int(rng, 1, 4));
    ExprPtr m = compile(text, d, ExprRole::Mask);
    World w = random_world(d, rng, 128);
    for (int j = 0; j < 3; ++j) {
      Tile t = j == 0 ? random_tile(rng, w, 48) : grid_tile(rng, w, j == 1 ? 16 : 32, 32);
      TileClass c = classify(m, Box{t.q0, t.q1, t.kv0, t.kv1}, inputs_for(w, d, true, true));
      TileClass want = truth(brute_force(*m, w, t.q0, t.q1, t.kv0, t.kv1));
      INFO("mask: " << text << "  tile q[" << t.q0 << "," << t.q1 << ") kv[" << t.kv0 << "," << t.kv1 << ")");
      REQUIRE(c == want);
      ++exact;
    }
  }
  CHECK(exact == 6000);
}

TEST_CASE("shorthands and their conjunctions are exact at tile granularity", "[dsl][classify]") {
  const Decls d = Decls::standard();
  const char* masks[] = {
      "causal", "causal_br", "window(w, 0)", "window(w, n)", "prefix(n)", "prefix(n) || causal",
      "causal && window(w, 0)", "causal_br && window(n, 0)", "prefix(n) && window(w, w)", "causal && prefix(n)",
      "causal && q - kv < w", "causal_br && prefix(n) && window(w, lo)", "!causal", "window(3, 5) && !prefix(n)",
  };
  std::mt19937 rng(11);
  for (const char* text : masks) {
    ExprPtr m = compile(text, d, ExprRole::Mask);
    int partial = 0, total = 0;
    for (int i = 0; i < 300; ++i) {
      World w = random_world(d, rng, 200);
      const int bm = 1 << rand_int(rng, 2, 5), bn = 1 << rand_int(rng, 2, 5);
      Tile t = grid_tile(rng, w, bm, bn);
      TileClass c = classify(m, Box{t.q0, t.q1, t.kv0, t.kv1}, inputs_for(w, d, true, false));
      TileClass want = truth(brute_force(*m, w, t.q0, t.q1, t.kv0, t.kv1));
      INFO(text << " tile q[" << t.q0 << "," << t.q1 << ") kv[" << t.kv0 << "," << t.kv1 << ") n=" << w.params[1].i << " w=" << w.params[3].i);
      REQUIRE(c == want);
      partial += c == TileClass::Partial;
      ++total;
    }
    CHECK(partial < total);  // a mask whose every tile is partial would say nothing
  }
}

TEST_CASE("a causal mask classifies the diagonal and both triangles", "[dsl][classify]") {
  const Decls d = Decls::standard();
  ExprPtr m = compile("causal", d, ExprRole::Mask);
  MaskInputs in;
  in.seq_q = in.seq_kv = 256;
  for (int qi = 0; qi < 4; ++qi)
    for (int ki = 0; ki < 4; ++ki) {
      TileClass c = classify(m, Box{qi * 64, qi * 64 + 64, ki * 64, ki * 64 + 64}, in);
      TileClass want = ki > qi ? TileClass::Empty : ki < qi ? TileClass::Full : TileClass::Partial;
      CHECK(c == want);
    }
}

TEST_CASE("interval analysis bounds every value an expression takes", "[dsl][interval][property]") {
  std::mt19937 rng(99);
  const Decls d = Decls::standard();
  static const char* numeric[] = {
      "q * kv - 7", "q / (kv - 3)", "q % (kv - 5)", "-q / -1", "abs(q - kv) * 3", "min(q, kv) - max(lo, n)",
      "q * 2147483647", "(q - kv) / 0", "(q - kv) % 0", "t * val[kv] + 0.25", "tanh(val[kv]) * t", "exp(t) / (q + 1)",
      "floor(val[kv] / 3.0)", "sqrt(val[kv])", "log(val[kv])", "q + 0.1 * kv", "val[kv] % t", "min(val[kv], t) + max(t, 2)",
      "-2147483648 / (kv - kv - 1)", "abs(q - 2147483647 - 2)", "exp2(val[kv])", "(q > kv ? 1.5 : -2) * t", "where(causal, q, kv) - n",
  };
  for (const char* text : numeric) {
    ExprPtr e = compile(text, d, ExprRole::Score);
    for (int i = 0; i < 200; ++i) {
      World w = random_world(d, rng, 64);
      Tile t = random_tile(rng, w, 24);
      Bounds bd = Bounds::tile(t.q0, t.q1, t.kv0, t.kv1, w.seq_q, w.seq_kv);
      if (i % 2) for (const auto& v : w.params) bd.params.push_back(v);
      bd.b = IRange::point(w.b);
      bd.h = IRange::point(w.h);
      bd.h_kv = IRange::point(w.h_kv);
      Range r = analyze(*e, bd).value;
      for (int64_t q = t.q0; q < t.q1; ++q)
        for (int64_t kv = t.kv0; kv < t.kv1; ++kv) {
          Value v = eval(*e, w.env(static_cast<int32_t>(q), static_cast<int32_t>(kv)));
          INFO(text << " at q=" << q << " kv=" << kv << " value " << (v.type == Type::F32 ? v.f : v.i) << " range [" << r.ilo
                    << "," << r.ihi << "] / [" << r.flo << "," << r.fhi << "] nan=" << r.nan);
          REQUIRE(r.contains(v));
        }
    }
  }
}

TEST_CASE("wrap-around is reported and kept sound", "[dsl][interval]") {
  const Decls d = Decls::standard();
  ExprPtr e = compile("q + 2147483000 < kv", d, ExprRole::Mask);
  MaskInputs in;
  in.seq_q = in.seq_kv = 4096;
  // q + 2147483000 wraps negative for q >= 648, so the mask is true there.
  Bounds bd = Bounds::tile(1000, 1064, 0, 64, 4096, 4096);
  CHECK(analyze(*e, bd).may_wrap);
  const World w = [&] { World x; x.seq_q = x.seq_kv = 4096; return x; }();
  Brute b = brute_force(*e, w, 1000, 1064, 0, 64);
  CHECK(b.all);
  TileClass c = classify(e, Box{1000, 1064, 0, 64}, in);
  CHECK(c != TileClass::Empty);
  CHECK(classify(e, Box{0, 64, 0, 64}, in) == TileClass::Empty);  // no wrap below 648
}

TEST_CASE("comparisons of wrapping constants follow i32, as the kernel computes them", "[dsl][classify]") {
  // Found by the fuzzer: 21474836 * 565 wraps to -751619548 in i32, so the mask is true
  // everywhere; folded in int64 it looked false and the tile was classified EMPTY.
  const Decls d = Decls::standard();
  const World w = [&] { World x; x.seq_q = x.seq_kv = 6; return x; }();
  MaskInputs in;
  in.seq_q = in.seq_kv = 6;
  in.tensors = &d.tensors;
  // The third wraps on its right side only (q + 2147483747 < 0): false everywhere, and its
  // symbols cancel, so a constant fold in int64 would have said true.
  for (const char* text : {"-21364836 < 48 - 21474836 * 565", "q >= kv && 0 < 48 - 21474836 * 565",
                           "q + 2147483000 < q + 2147483647 + 100"}) {
    INFO(text);
    ExprPtr e = compile(text, d, ExprRole::Mask);
    Brute b = brute_force(*e, w, 0, 6, 0, 6);
    TileClass c = classify(e, Box{0, 6, 0, 6}, in);
    if (b.any) CHECK(c != TileClass::Empty);
    if (!b.all) CHECK(c != TileClass::Full);
  }
}

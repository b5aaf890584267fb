// The closed-form tile ranges as the kernels compute them: the IR that templates/common/kv_bounds
// emits, run on the host (tests/internal/ir_eval) and compared with brute force over random masks,
// lengths and tile sizes, in both directions (key tiles per query tile for the forward, query tiles
// per key tile for the backward's transposed walk).
#include <catch2/catch.hpp>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "compiler/dsl/kv_range.hpp"
#include "templates/common/kv_bounds.hpp"
#include "tests/dsl/helpers.hpp"
#include "tests/internal/ir_eval.hpp"

using namespace flashjit;
using namespace flashjit::dsl;
using namespace flashjit::dsl::test;

namespace {

// One emitted bounds computation: a function whose arguments are the bounds' inputs.
class EmittedBounds {
 public:
  EmittedBounds(const KvRange* range, size_t n_params) : module_("bounds", ctx_) {
    auto* i32 = llvm::Type::getInt32Ty(ctx_);
    std::vector<llvm::Type*> types(8 + n_params, i32);
    types[7] = llvm::Type::getInt1Ty(ctx_);
    fn_ = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), types, false),
                                 llvm::GlobalValue::ExternalLinkage, "bounds", module_);
    tile::Emitter e(module_, fn_);
    e.b.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
    KvBoundsInputs in;
    in.q_first = fn_->getArg(0), in.q_last = fn_->getArg(1);
    in.b = fn_->getArg(2), in.h = fn_->getArg(3), in.h_kv = fn_->getArg(4);
    in.seq_q = fn_->getArg(5), in.seq_kv = fn_->getArg(6), in.range_ok = fn_->getArg(7);
    for (size_t i = 0; i < n_params; ++i) in.params.push_back(fn_->getArg(8 + i));
    bounds_ = emit_kv_bounds(e, range, in);
  }

  // The half-open ranges for tile rows [first, last] with these symbol values.
  TileKvRange at(int64_t first, int64_t last, const World& w, int64_t seq_q, int64_t seq_kv, bool range_ok) {
    flashjit::test::IrEval ev;
    const int64_t args[] = {first, last, w.b, w.h, w.h_kv, seq_q, seq_kv, range_ok};
    for (int i = 0; i < 8; ++i) ev.bind(fn_->getArg(i), args[i]);
    for (size_t i = 0; i < w.params.size(); ++i)
      ev.bind(fn_->getArg(8 + i), w.params[i].type == Type::I32 ? w.params[i].i : 0);
    return {ev.value(bounds_.visit_lo), ev.value(bounds_.visit_hi), ev.value(bounds_.full_lo), ev.value(bounds_.full_hi)};
  }

 private:
  llvm::LLVMContext ctx_;
  llvm::Module module_;
  llvm::Function* fn_;
  KvBounds bounds_{};
};

SymbolValues values_of(const World& w) {
  SymbolValues v;
  v.b = w.b, v.h = w.h, v.h_kv = w.h_kv, v.seq_q = w.seq_q, v.seq_kv = w.seq_kv;
  for (const auto& p : w.params) v.params.push_back(p);
  return v;
}

enum class Along { queries, keys };

bool visible(const ExprPtr& m, const World& w, Along along, int64_t tile_pos, int64_t other) {
  const int64_t q = along == Along::queries ? tile_pos : other, kv = along == Along::queries ? other : tile_pos;
  return eval_mask(*m, w.env(static_cast<int32_t>(q), static_cast<int32_t>(kv)));
}

// The emitted ranges of tile [t0, t1) of the sequence `along` runs on.
TileKvRange emitted(EmittedBounds& eb, const KvRange& r, const World& w, Along along, int64_t t0, int64_t t1,
                    const Decls& d) {
  const SymbolValues v = values_of(w);
  if (along == Along::queries)
    return eb.at(t0, t1 - 1, w, w.seq_q, w.seq_kv, !kv_range_may_overflow(r, v, &d.tensors));
  return eb.at(t0, t1 - 1, w, w.seq_kv, w.seq_q, !kv_range_may_overflow(r, swapped_sizes(v), &d.tensors));
}

// Whether the range has a full band with a guard (a condition on the tile's own positions, such as
// prefix(n) seen from the keys): the kernels never count such a band as full, so the full range of a
// tile that meets the guard everywhere is sound but not the largest.
bool guarded_full(const KvRange& r) {
  for (const KvBand& b : r.full)
    if (!b.guards.empty()) return true;
  return false;
}

// Soundness against every element of the tile; tightness (visit = hull of the visible positions,
// full = those visible from the whole tile) when `tight`, of `full` too when `tight_full`.
void check(const ExprPtr& m, const std::string& text, const World& w, Along along, const TileKvRange& r, int64_t t0,
           int64_t t1, bool tight, bool tight_full = true) {
  const int64_t other = along == Along::queries ? w.seq_kv : w.seq_q;
  INFO(text << (along == Along::queries ? " q[" : " kv[") << t0 << "," << t1 << ") seq " << w.seq_q << "x" << w.seq_kv
            << " visit [" << r.visit_lo << "," << r.visit_hi << ") full [" << r.full_lo << "," << r.full_hi << ")");
  REQUIRE(r.visit_lo >= 0);
  REQUIRE(r.visit_hi <= other);
  int64_t lo = INT64_MAX, hi = -1, flo = -1, fhi = -1;
  for (int64_t o = 0; o < other; ++o) {
    bool any = false, all = true;
    for (int64_t t = t0; t < t1; ++t) {
      const bool v = visible(m, w, along, t, o);
      any |= v, all &= v;
    }
    if (any) REQUIRE((o >= r.visit_lo && o < r.visit_hi));
    if (o >= r.full_lo && o < r.full_hi) REQUIRE(all);
    if (any) lo = std::min(lo, o), hi = o + 1;
    if (all && flo < 0) flo = o;
    if (all) fhi = o + 1;
  }
  if (!tight) return;
  if (hi >= 0) CHECK((r.visit_lo == lo && r.visit_hi == hi));
  if (!tight_full) return;
  if (fhi >= 0) CHECK((r.full_lo == flo && r.full_hi == fhi));
  else CHECK(r.full_lo >= r.full_hi);
}

std::pair<int64_t, int64_t> random_tile(std::mt19937& rng, int32_t seq) {
  const int size = rand_int(rng, 1, 70);  // tile sizes off the powers of two too
  const int64_t t0 = static_cast<int64_t>(rand_int(rng, 0, (seq - 1) / size)) * size;
  return {t0, std::min<int64_t>(seq, t0 + size)};
}

}  // namespace

TEST_CASE("kv bounds: the emitted ranges are sound for random masks, both directions", "[kv_bounds][property]") {
  std::mt19937 rng(917);
  const Decls d = Decls::standard();
  for (int i = 0; i < 600; ++i) {
    const std::string text = random_mask(rng, i % 3 != 0, rand_int(rng, 1, 4));
    const ExprPtr m = compile(text, d, ExprRole::Mask);
    const KvRange kr = derive_kv_range(m, &d.tensors), qr = derive_q_range(m, &d.tensors);
    EmittedBounds forward(&kr, d.params.size()), backward(&qr, d.params.size());
    const World w = random_world(d, rng, 90);
    for (int j = 0; j < 3; ++j) {
      auto [q0, q1] = random_tile(rng, w.seq_q);
      check(m, text, w, Along::queries, emitted(forward, kr, w, Along::queries, q0, q1, d), q0, q1, false);
      auto [kv0, kv1] = random_tile(rng, w.seq_kv);
      check(m, text, w, Along::keys, emitted(backward, qr, w, Along::keys, kv0, kv1, d), kv0, kv1, false);
    }
  }
}

TEST_CASE("kv bounds: the emitted ranges of the shorthands are tight, off the tile grid too", "[kv_bounds]") {
  // Windows, prefixes and diagonal offsets whose edges fall anywhere inside a tile.
  const Decls d = Decls::standard();
  const char* masks[] = {"causal", "causal_br", "window(w, n)", "window(254, 0)", "window(257, 0)", "window(1, 130)",
                         "prefix(n)", "causal && window(w, 0)", "causal_br && window(n, 0)", "causal && q - kv < w"};
  std::mt19937 rng(33);
  for (const char* text : masks) {
    const ExprPtr m = compile(text, d, ExprRole::Mask);
    const KvRange kr = derive_kv_range(m, &d.tensors), qr = derive_q_range(m, &d.tensors);
    REQUIRE(kr.exact);
    EmittedBounds forward(&kr, d.params.size()), backward(&qr, d.params.size());
    for (int i = 0; i < 150; ++i) {
      World w = random_world(d, rng, 300);
      w.params[1] = Value::of_i32(rand_int(rng, 0, 200));  // n
      w.params[3] = Value::of_i32(rand_int(rng, 0, 200));  // w
      auto [q0, q1] = random_tile(rng, w.seq_q);
      check(m, text, w, Along::queries, emitted(forward, kr, w, Along::queries, q0, q1, d), q0, q1, true);
      auto [kv0, kv1] = random_tile(rng, w.seq_kv);
      check(m, text, w, Along::keys, emitted(backward, qr, w, Along::keys, kv0, kv1, d), kv0, kv1, true,
            !guarded_full(qr));
    }
  }
}

namespace {

// One emitted row_keys: a function of (q, b, h, h_kv, seq_q, seq_kv, params...) for `band`.
class EmittedRow {
 public:
  EmittedRow(const KvBand& band, size_t n_params) : module_("row", ctx_) {
    auto* i32 = llvm::Type::getInt32Ty(ctx_);
    fn_ = llvm::Function::Create(
        llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), std::vector<llvm::Type*>(6 + n_params, i32), false),
        llvm::GlobalValue::ExternalLinkage, "row", module_);
    tile::Emitter e(module_, fn_);
    e.b.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
    KvBoundsInputs in;
    in.b = fn_->getArg(1), in.h = fn_->getArg(2), in.h_kv = fn_->getArg(3);
    in.seq_q = fn_->getArg(4), in.seq_kv = fn_->getArg(5);
    for (size_t i = 0; i < n_params; ++i) in.params.push_back(fn_->getArg(6 + i));
    keys_ = row_keys(e, band, in, fn_->getArg(0));
  }

  std::pair<int64_t, int64_t> at(int64_t q, const World& w) {
    flashjit::test::IrEval ev;
    const int64_t args[] = {q, w.b, w.h, w.h_kv, w.seq_q, w.seq_kv};
    for (int i = 0; i < 6; ++i) ev.bind(fn_->getArg(i), args[i]);
    for (size_t i = 0; i < w.params.size(); ++i)
      ev.bind(fn_->getArg(6 + i), w.params[i].type == Type::I32 ? w.params[i].i : 0);
    return {ev.value(keys_.lo), ev.value(keys_.hi)};
  }

 private:
  llvm::LLVMContext ctx_;
  llvm::Module module_;
  llvm::Function* fn_;
  RowKeys keys_{};
};

// Every row of `w`: key kv is visible exactly when lo <= kv <= hi.
void check_rows(EmittedRow& row, const ExprPtr& m, const std::string& text, const World& w) {
  for (int64_t q = 0; q < w.seq_q; ++q) {
    const auto [lo, hi] = row.at(q, w);
    INFO(text << " q " << q << " seq " << w.seq_q << "x" << w.seq_kv << " keys [" << lo << "," << hi << "]");
    REQUIRE(lo >= 0);
    REQUIRE(hi <= w.seq_kv - 1);
    for (int64_t kv = 0; kv < w.seq_kv; ++kv) REQUIRE(visible(m, w, Along::queries, q, kv) == (lo <= kv && kv <= hi));
  }
}

}  // namespace

TEST_CASE("kv bounds: a mask that is one key interval per row is that interval, row by row", "[kv_bounds]") {
  const Decls d = Decls::standard();
  // Qualify: causal, constant windows reaching back, prefixes (a param n too: kv < n needs no
  // arithmetic). Not: what may wrap i32 as far as an analysis without the launch's sizes knows
  // (causal_br's q - seq_q + seq_kv, window(1, 130)'s q + 130 with q up to 2^31 - 1, window(w, n)'s
  // q - w), a tensor read (not affine), and two bands (not one interval).
  const std::pair<const char*, bool> masks[] = {{"causal", true},
                                                {"window(254, 0)", true},
                                                {"window(0, 0)", true},
                                                {"prefix(100)", true},
                                                {"q - kv < 37 && kv <= q", true},
                                                {"causal_br", false},
                                                {"window(1, 130)", false},
                                                {"window(w, n)", false},
                                                {"prefix(n)", true},
                                                {"doc[q] == doc[kv]", false},
                                                {"kv <= q || kv < 5", false}};
  std::mt19937 rng(52);
  for (const auto& [text, qualifies] : masks) {
    const ExprPtr m = compile(text, d, ExprRole::Mask);
    const KvRange kr = derive_kv_range(m, &d.tensors);
    const KvBand* band = interval_band(kr, &d.tensors);
    INFO(text << ": " << describe_kv_range(kr));
    REQUIRE((band != nullptr) == qualifies);
    if (!band) continue;
    EmittedRow row(*band, d.params.size());
    for (int i = 0; i < 40; ++i) check_rows(row, m, text, random_world(d, rng, 300));
  }
  // Random affine masks: wherever a band is picked, it is the mask.
  int picked = 0;
  for (int i = 0; i < 400; ++i) {
    const std::string text = random_mask(rng, true, rand_int(rng, 1, 3));
    const ExprPtr m = compile(text, d, ExprRole::Mask);
    const KvRange kr = derive_kv_range(m, &d.tensors);
    const KvBand* band = interval_band(kr, &d.tensors);
    if (!band) continue;
    ++picked;
    EmittedRow row(*band, d.params.size());
    check_rows(row, m, text, random_world(d, rng, 60));
  }
  CHECK(picked > 20);
}

#include "templates/common/kv_bounds.hpp"

#include <limits>

namespace flashjit {

namespace {

using llvm::Value;

struct Forms {
  tile::Emitter& e;
  const KvBoundsInputs& in;

  Value* sym(dsl::Sym s) {
    switch (s) {
      case dsl::Sym::B: return in.b;
      case dsl::Sym::H: return in.h;
      case dsl::Sym::HKv: return in.h_kv;
      case dsl::Sym::SeqQ: return in.seq_q;
      case dsl::Sym::SeqKv: return in.seq_kv;
      default: return in.params.at(static_cast<int>(s) - static_cast<int>(dsl::Sym::Param0));
    }
  }

  // f at q (i64, exact: the forms are int64 and the launch checked that none wraps i32).
  Value* at(const dsl::LinearForm& f, Value* q) {
    auto& B = e.b;
    Value* v = e.c64(f.c);
    for (const auto& [s, a] : f.coeff) {
      Value* x = s == dsl::Sym::Q ? q : sym(s);
      v = B.CreateAdd(v, B.CreateMul(e.c64(a), B.CreateSExt(x, e.i64())));
    }
    return v;
  }
  // Linear in q: the extreme over [q_first, q_last] is at the end the q coefficient points to.
  Value* min_over_tile(const dsl::LinearForm& f) { return at(f, f.coeff_of(dsl::Sym::Q) >= 0 ? in.q_first : in.q_last); }
  Value* max_over_tile(const dsl::LinearForm& f) { return at(f, f.coeff_of(dsl::Sym::Q) >= 0 ? in.q_last : in.q_first); }

  Value* smax(Value* a, Value* b) { return e.b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, a, b); }
  Value* smin(Value* a, Value* b) { return e.b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a, b); }
};

}  // namespace

TileRows tile_rows(tile::Emitter& e, Value* tile, int rows, Value* seq) {
  auto& B = e.b;
  Value* first = B.CreateMul(tile, e.c32(rows));
  Value* last = B.CreateSub(B.CreateBinaryIntrinsic(llvm::Intrinsic::smin, seq, B.CreateAdd(first, e.c32(rows))), e.c32(1));
  return {first, last};
}

TileSpan covering_tiles(tile::Emitter& e, const KvBounds& bounds, int width) {
  auto& B = e.b;
  Value* first = B.CreateSDiv(bounds.visit_lo, e.c32(width));
  Value* end = B.CreateSDiv(B.CreateAdd(bounds.visit_hi, e.c32(width - 1)), e.c32(width));
  return {first, end};
}

Value* tile_in_full_range(tile::Emitter& e, const KvBounds& bounds, Value* n0, int width) {
  auto& B = e.b;
  return B.CreateAnd(B.CreateICmpSGE(n0, bounds.full_lo), B.CreateICmpSLE(B.CreateAdd(n0, e.c32(width)), bounds.full_hi));
}

const dsl::KvBand* interval_band(const dsl::KvRange& range, const std::vector<dsl::TensorDecl>* tensors) {
  if (!range.exact || range.visit.size() != 1) return nullptr;
  // No sizes or params known: every symbol spans its whole i32 range, a superset of any launch's.
  return dsl::kv_range_may_overflow(range, dsl::SymbolValues{}, tensors) ? nullptr : &range.visit[0];
}

RowKeys row_keys(tile::Emitter& e, const dsl::KvBand& band, const KvBoundsInputs& in, Value* q) {
  auto& B = e.b;
  Forms f{e, in};
  Value* seq_kv = B.CreateSExt(in.seq_kv, e.i64());
  Value* lo = e.c64(0);
  for (const auto& l : band.lower) lo = f.smax(lo, f.at(l, q));
  Value* hi = B.CreateSub(seq_kv, e.c64(1));
  for (const auto& u : band.upper) hi = f.smin(hi, f.at(u, q));
  for (const auto& g : band.guards) hi = B.CreateSelect(B.CreateICmpSGE(f.at(g, q), e.c64(0)), hi, e.c64(-1));
  // Clamped into [0, seq_kv] and [-1, seq_kv - 1], where i32 holds them exactly.
  lo = f.smin(lo, seq_kv);
  hi = f.smax(hi, e.c64(-1));
  return {B.CreateTrunc(lo, e.i32()), B.CreateTrunc(hi, e.i32())};
}

KvBounds emit_kv_bounds(tile::Emitter& e, const dsl::KvRange* range, const KvBoundsInputs& in) {
  auto& B = e.b;
  Value* zero = e.c32(0);
  if (!range) return {zero, in.seq_kv, zero, in.seq_kv};
  Forms f{e, in};
  Value* last_key = B.CreateSub(B.CreateSExt(in.seq_kv, e.i64()), e.c64(1));
  const int64_t kBig = std::numeric_limits<int64_t>::max() / 4;

  // Visit: hull over bands of [max_i min lower_i, min_j max upper_j] ∩ [0, seq_kv − 1].
  Value* vlo = e.c64(kBig);
  Value* vhi = e.c64(-1);
  for (const dsl::KvBand& band : range->visit) {
    Value* lo = e.c64(0);
    for (const auto& l : band.lower) lo = f.smax(lo, f.min_over_tile(l));
    Value* hi = last_key;
    for (const auto& u : band.upper) hi = f.smin(hi, f.max_over_tile(u));
    Value* nonempty = B.CreateICmpSLE(lo, hi);
    vlo = B.CreateSelect(nonempty, f.smin(vlo, lo), vlo);
    vhi = B.CreateSelect(nonempty, f.smax(vhi, hi), vhi);
  }
  Value* any = B.CreateICmpSLE(vlo, vhi);
  Value* visit_lo = B.CreateSelect(any, vlo, e.c64(0));
  Value* visit_hi = B.CreateSelect(any, B.CreateAdd(vhi, e.c64(1)), e.c64(0));

  // Full: the widest unguarded band of [max_i max lower_i, min_j min upper_j], inside visit.
  Value* flo = visit_lo;
  Value* fhi = visit_lo;  // empty
  for (const dsl::KvBand& band : range->full) {
    if (!band.guards.empty()) continue;
    Value* lo = visit_lo;
    for (const auto& l : band.lower) lo = f.smax(lo, f.max_over_tile(l));
    Value* hi = visit_hi;  // exclusive
    for (const auto& u : band.upper) hi = f.smin(hi, B.CreateAdd(f.min_over_tile(u), e.c64(1)));
    Value* wider = B.CreateICmpSGT(B.CreateSub(hi, lo), B.CreateSub(fhi, flo));
    flo = B.CreateSelect(wider, lo, flo);
    fhi = B.CreateSelect(wider, hi, fhi);
  }
  auto i32 = [&](Value* v) { return B.CreateTrunc(v, e.i32()); };
  // Without a valid closed form: every key visited, each under the per-element mask.
  return {B.CreateSelect(in.range_ok, i32(visit_lo), zero), B.CreateSelect(in.range_ok, i32(visit_hi), in.seq_kv),
          B.CreateSelect(in.range_ok, i32(flo), zero), B.CreateSelect(in.range_ok, i32(fhi), zero)};
}

}  // namespace flashjit

// The score modifier and the mask on a tile of scores, per element (compiler/lower_expr) or, for a
// mask that is one key interval per row (templates/common/kv_bounds), as two bounds per row.
#include <cmath>

#include "compiler/lower_expr.hpp"
#include "templates/common/kernel_args.hpp"
#include "templates/common/kv_bounds.hpp"
#include "templates/fwd/forward_kernel.hpp"

namespace flashjit::fwd {

// The score modifier on scale·qkᵀ; its result goes to the exp2 domain (× log2 e) here, so the
// softmax multiplies by 1 instead of scale·log2 e. Expressions read q and kv clamped into range,
// so rows past seq_q and keys past seq_kv (masked anyway) never index a tensor out of bounds.
void ForwardKernel::modify_scores(RegTile& s, KeyTile& t) {
  auto& B = e_.b;
  t.last_q = B.CreateSub(seq_q_, e_.c32(1));
  t.last_kv = B.CreateSub(seq_kv_, e_.c32(1));
  if (plan_.spec->score) {
    Value* scale = B.CreateFMul(scale_log2_, e_.cf(static_cast<float>(M_LN2)));
    for (size_t mt = 0; mt < s.size(); ++mt)
      for (int nt = 0; nt < NT; ++nt)
        for (int i = 0; i < 4; ++i) {
          ExprInputs at = ex_;
          at.q = clamp(query_of(row_of(int(mt), i)), t.last_q);
          at.kv = clamp(key_of(t, nt, i), t.last_kv);
          at.score = B.CreateFMul(s[mt][nt][i], scale);
          s[mt][nt][i] = B.CreateFMul(lower_expr(e_, *plan_.spec->score, at), e_.cf(static_cast<float>(M_LOG2E)));
        }
  }
  s_vars_.store(e_, s);
}

// The mask runs only in tiles that are not wholly visible (inside [full_lo, full_hi), or flagged
// full in the list): there, a masked score becomes −inf, and so does every key past seq_kv.
void ForwardKernel::mask_scores(RegTile& s, const KeyTile& t) {
  auto& B = e_.b;
  Value* full = walk_->has_list() ? walk_->listed_full(e_, walk_->entry(e_, t.j, 0, t.entry))
                                  : tile_in_full_range(e_, plan_.wg_key_ranges ? wg_bounds_ : bounds_, t.n0, BN);
  const dsl::KvBand* band = plan_.spec->mask ? interval_band(plan_.spec->kv_range, &plan_.spec->dsl.tensors) : nullptr;
  e_.when(B.CreateNot(full), "mask", [&] {
    for (size_t mt = 0; mt < s_vars_.vars.size(); ++mt) {
      // With an interval mask, key base + c of row r (base = n0 + 2·t4, c = 8·nt + (i & 1), a
      // constant) is visible for c in [first_r, first_r + width_r], one unsigned compare: c −
      // first_r ≤ width_r (an empty row gets first_r = 2³⁰, so no c passes). Per element an IADD,
      // an ISETP and an FSEL, or without a lower bound (lo_r = 0) c ≤ hi_r − base, an ISETP and an
      // FSEL; the expression and the seq_kv test cost an ISETP and an FSEL per comparison (six at
      // d = 64 with window(1024, 0), docs/perf-notes.md §62).
      Value *first[2] = {}, *width[2] = {};
      if (band) {
        Value* base = key_of(t, 0, 0);
        const KvBoundsInputs in = kv_bounds_inputs(e_, ex_, q_first_, q_final_);
        for (int r = 0; r < 2; ++r) {
          Value* q = clamp(query_of(row_of(int(mt), 2 * r)), t.last_q);
          const RowKeys keys = row_keys(e_, *band, in, q);
          if (band->lower.empty()) {
            width[r] = B.CreateSub(keys.hi, base);
            continue;
          }
          Value* empty = B.CreateICmpSGT(keys.lo, keys.hi);
          first[r] = B.CreateSelect(empty, e_.c32(1 << 30), B.CreateSub(keys.lo, base));
          width[r] = B.CreateSelect(empty, e_.c32(0), B.CreateSub(keys.hi, keys.lo));
        }
      }
      for (int nt = 0; nt < NT; ++nt)
        for (int i = 0; i < 4; ++i) {
          Value* visible;
          if (band) {
            Value* c = e_.c32(8 * nt + (i & 1));
            visible = band->lower.empty() ? B.CreateICmpSLE(c, width[i >> 1])
                                          : B.CreateICmpULE(B.CreateSub(c, first[i >> 1]), width[i >> 1]);
          } else {
            Value* key = key_of(t, nt, i);
            visible = B.CreateICmpSLT(key, seq_kv_);
            if (plan_.spec->mask) {
              ExprInputs at = ex_;
              at.q = clamp(query_of(row_of(int(mt), i)), t.last_q);
              at.kv = clamp(key, t.last_kv);
              visible = B.CreateAnd(visible, lower_expr(e_, *plan_.spec->mask, at));
            }
          }
          llvm::AllocaInst* var = s_vars_.vars[mt][nt][i];
          B.CreateStore(B.CreateSelect(visible, B.CreateLoad(e_.f32(), var), e_.neg_inf()), var);
        }
    }
  });
  s = s_vars_.load(e_);
}

}  // namespace flashjit::fwd

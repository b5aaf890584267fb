// Closed-form key ranges for affine masks: per query tile, which keys to visit and which
// keys need no per-element mask — computed by the kernel, never read from a block mask.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/dsl/affine.hpp"
#include "compiler/dsl/ast.hpp"
#include "compiler/dsl/decl.hpp"

namespace flashjit::dsl {

// One band: the keys kv with
//     every guard g(q) >= 0   and   max_i lower[i](q) <= kv <= min_j upper[j](q).
// Each form is linear in q, b, h, h_kv, seq_q, seq_kv and i32 params (never kv); an empty
// `lower` means no lower bound (the kernel uses 0), an empty `upper` none (seq_kv - 1).
struct KvBand {
  std::vector<LinearForm> lower;
  std::vector<LinearForm> upper;
  std::vector<LinearForm> guards;
};

// What a kernel generator lowers. With M the mask:
//   M(q, kv)                       implies  OR over `visit` bands
//   OR over `full` bands           implies  M(q, kv)
// `exact` says both are equalities (the mask is affine: every comparison is linear in q and
// kv with a kv coefficient of ±1). Parts of the mask that are not affine (tensor reads,
// f32, products) widen `visit` and shrink `full`, so the kernel stays correct as long as it
// evaluates the mask per element outside the full range.
// Validity: the forms are exact integer arithmetic, equal to the mask's i32 arithmetic only
// while none of the `atoms` wraps around. Check kv_range_may_overflow() once per launch with
// the real sizes and params; if it says true, visit every key and treat none as full.
struct KvRange {
  std::vector<KvBand> visit;
  std::vector<KvBand> full;
  bool exact = false;
  std::vector<ExprPtr> atoms;  // the mask's linear comparisons
};

// For a query tile [q0, q1) of one (b, h): half-open key ranges within [0, seq_kv).
// Every visible key of any row of the tile lies in [visit_lo, visit_hi); every key in
// [full_lo, full_hi) is visible for every row (the full range may be empty: lo == hi).
struct TileKvRange {
  int64_t visit_lo = 0, visit_hi = 0;
  int64_t full_lo = 0, full_hi = 0;
};

// Derived once per spec (checked mask). Never fails: a mask with nothing affine in it
// gives one unconstrained visit band and no full band.
KvRange derive_kv_range(const ExprPtr& mask, const std::vector<TensorDecl>* tensors = nullptr);

// The CPU reference of what the kernel computes per tile. Per band: the rows where the band
// can be non-empty (a*q + c >= 0 for each guard, each upper - lower, each lower <= seq_kv - 1,
// each upper >= 0: one ceil/floor division each) narrow [q0, q1); the visit range is the
// hull over bands of [max_i min_ends lower_i, min_j max_ends upper_j] on those rows, the
// full range the largest merged piece of [max_i max_ends lower_i, min_j min_ends upper_j]
// over the whole tile. Both clamp to [0, seq_kv). `values` must give seq_q, seq_kv
// and every param/b/h that the bands mention (an unknown one makes the band's bound
// unknown: visit everything it could cover, full nothing).
TileKvRange eval_kv_range(const KvRange& r, int64_t q0, int64_t q1, const SymbolValues& values);

// The transposed range: per key tile, the queries to visit and those that see every key of the
// tile — what the backward's dK/dV walk needs (FlashAttention-2, Algorithm 2; FlexAttention's
// q_indices). It is the KvRange of transpose_mask(mask): its forms read kv where the forward's
// read q, and "seq_kv" in it means seq_q (the exchanged roles). Use eval_q_range, which exchanges
// the sizes back, and kv_range_may_overflow with swapped_sizes(values).
KvRange derive_q_range(const ExprPtr& mask, const std::vector<TensorDecl>* tensors = nullptr);
// For a key tile [kv0, kv1): half-open query ranges within [0, seq_q), with TileKvRange's promises
// read with q and kv exchanged (visit_* / full_* are query positions).
TileKvRange eval_q_range(const KvRange& q_range, int64_t kv0, int64_t kv1, const SymbolValues& values);
// `values` with seq_q and seq_kv exchanged: the symbol values a transposed range is evaluated at.
SymbolValues swapped_sizes(const SymbolValues& values);

// True when an atom's i32 arithmetic may wrap for some q in [0, seq_q), kv in [0, seq_kv)
// with these values (then the closed form does not describe the mask).
bool kv_range_may_overflow(const KvRange& r, const SymbolValues& values, const std::vector<TensorDecl>* tensors = nullptr);

// Human/dump form, e.g. "visit: kv in [q - 256, q]; full: kv in [q1 - 1 - 256, q0]..."
std::string describe_kv_range(const KvRange& r, const std::vector<Param>* params = nullptr);
// The same for a transposed range, in the mask's own names: "visit: q in [kv, kv + 256]; ...".
std::string describe_q_range(const KvRange& q_range, const std::vector<Param>* params = nullptr);

}  // namespace flashjit::dsl

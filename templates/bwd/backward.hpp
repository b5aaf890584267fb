// The FlashAttention backward template (FlashAttention-2, Dao 2023, Algorithm 2), emitted as LLVM
// IR: a pre-pass for D = rowsum(dO ∘ O), a dK/dV kernel (one CTA per key tile) and a dQ kernel
// (one CTA per query tile), all with the parameters of templates/common/backward_abi.hpp.
#pragma once

#include <string>

#include "templates/bwd/plan.hpp"

namespace llvm {
class Module;
}  // namespace llvm

namespace flashjit {

// Entry points of a backward module named `entry`. The default launch sequence is prep, dkdv
// (dQ by atomics into the fp32 workspace), dv when split, dq_convert; the deterministic one is
// prep, dkdv_det, dv when split, dq.
struct BackwardEntries {
  std::string dkdv;        // dK, dV and dQ's atomic partial sums; dK and dQ's when the plan splits
  std::string dkdv_det;    // dK and dV (dK only when split), no dQ
  std::string dv;          // dV only (empty unless the plan splits)
  std::string dq;          // the dQ kernel: a CTA per query tile, fixed summation order
  std::string dq_convert;  // the fp32 workspace × scale → dq in the dtype
  std::string prep;
};
BackwardEntries backward_entries(const BackwardPlan& plan, const std::string& entry);

void emit_attention_backward(llvm::Module& module, const BackwardPlan& plan, const std::string& entry);

// The pre-pass (templates/bwd/prep.cpp): D[b, h, q] = Σ dO ∘ O over d_v, in fp32.
void emit_backward_prep(llvm::Module& module, const BackwardPlan& plan, const std::string& name);
// dq[b, q, h, :] = scale · workspace[b, h, q, :], rounded to the dtype (templates/bwd/prep.cpp).
void emit_backward_dq_convert(llvm::Module& module, const BackwardPlan& plan, const std::string& name);

}  // namespace flashjit

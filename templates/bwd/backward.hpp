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

// Entry points of a backward module named `entry`, launched in this order: prep, dkdv, dv (when
// the plan splits), dq.
struct BackwardEntries {
  std::string dkdv;  // dK and dV; dK only when the plan splits them
  std::string dv;    // dV only (empty unless the plan splits)
  std::string dq;
  std::string prep;
};
BackwardEntries backward_entries(const BackwardPlan& plan, const std::string& entry);

void emit_attention_backward(llvm::Module& module, const BackwardPlan& plan, const std::string& entry);

// The pre-pass (templates/bwd/prep.cpp): D[b, h, q] = Σ dO ∘ O over d_v, in fp32.
void emit_backward_prep(llvm::Module& module, const BackwardPlan& plan, const std::string& name);


}  // namespace flashjit

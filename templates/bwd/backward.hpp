// The FlashAttention backward template (FlashAttention-2, Dao 2023, Algorithm 2), emitted as LLVM
// IR: a pre-pass for D = rowsum(dO ∘ O), a dK/dV kernel (one CTA per key tile) and a dQ kernel
// (one CTA per query tile), all with the parameters of templates/common/backward_abi.hpp.
#pragma once

#include <string>

#include "templates/bwd/plan.hpp"
#include "templates/common/kernel_args.hpp"

namespace llvm {
class Module;
}  // namespace llvm

namespace flashjit {

// The block maps of the backward (templates/bwd/block_map.cpp): for the dQ kernel (`keys` false:
// per tile of plan.q.rows queries, its tiles of plan.q.cols keys) or the dK/dV kernel (per tile of
// plan.kv.rows keys, its tiles of plan.kv.cols queries). Grid: x = row tiles, y = query heads,
// z = batch; kMapThreads threads. Maps are per (batch, query head) as BlockMapPolicy says.
inline constexpr int kMapThreads = 128;
void emit_backward_map(llvm::Module& module, const BackwardPlan& plan, bool keys, const std::string& name);
// Row `row_tile` of that map for the (batch, query head) of `ex`, in a kernel with the backward's
// parameters.
BlockMapRow backward_map_row(tile::Emitter& e, const BackwardPlan& plan, bool keys, const ExprInputs& ex,
                             llvm::Value* row_tile);

void emit_attention_backward(llvm::Module& module, const BackwardPlan& plan, const std::string& entry);

// The pre-pass (templates/bwd/prep.cpp): D[b, h, q] = Σ dO ∘ O over d_v, in fp32.
void emit_backward_prep(llvm::Module& module, const BackwardPlan& plan, const std::string& name);
// dQ = scale · the fp32 workspace [b, h, q, d_qk], rounded to the dtype (templates/bwd/prep.cpp).
void emit_backward_dq_convert(llvm::Module& module, const BackwardPlan& plan, const std::string& name);


}  // namespace flashjit

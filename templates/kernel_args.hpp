// The parameter list shared by the forward kernel and its block-map pre-pass, and the values
// both derive from it: what expressions read, the closed-form kv bounds' inputs, the map row.
#pragma once

#include <string>

#include "compiler/lower_expr.hpp"
#include "templates/forward_plan.hpp"
#include "templates/kv_bounds.hpp"

namespace flashjit {

// Fixed ABI (templates/forward_abi.hpp), then params and tensors by slot, then — with a block
// map — the tile lists and counts. Marked as a kernel with `plan.threads` launch bounds.
llvm::Function* declare_kernel(llvm::Module& m, const ForwardPlan& plan, const std::string& name);

// Builtins, params and tensors (with their launch extents) as the function's IR values.
ExprInputs expr_inputs(tile::Emitter& e, const ForwardPlan& plan, llvm::Value* batch, llvm::Value* head,
                       llvm::Value* head_kv);

KvBoundsInputs kv_bounds_inputs(tile::Emitter& e, const ForwardPlan& plan, const ExprInputs& ex, llvm::Value* q_first,
                                llvm::Value* q_last);

// This CTA's row of the block map: pointers to its tile count and tile list.
struct BlockMapRow {
  llvm::Value* count;  // ptr addrspace(1) to i32
  llvm::Value* tiles;  // ptr addrspace(1) to i32 × ceil(seq_kv / block_n)
};
BlockMapRow block_map_row(tile::Emitter& e, const ForwardPlan& plan, const ExprInputs& ex, llvm::Value* q_tile);

}  // namespace flashjit

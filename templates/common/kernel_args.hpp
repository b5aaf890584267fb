// The parameter list shared by the forward kernel and its block-map pre-pass, and the values
// both derive from it: what expressions read, the closed-form kv bounds' inputs, the map row.
#pragma once

#include <string>

#include "compiler/analyzed_spec.hpp"
#include "compiler/lower_expr.hpp"
#include "templates/common/kv_bounds.hpp"

namespace flashjit {

// What ptxas budgets registers by (NVVM IR spec, "nvvm.annotations": maxntidx, minctasm).
struct LaunchBounds {
  int threads = 0;          // per CTA
  int min_ctas_per_sm = 1;  // .minnctapersm
};

// What follows the spec's params and tensors: the block map's tile lists and counts (forward
// kernels of masks with a block map), the backward's parameters (templates/common/backward_abi.hpp),
// or nothing.
enum class KernelTail { none, block_map, backward };

// Fixed ABI (templates/common/forward_abi.hpp), then params and tensors by slot, then the tail,
// then `tensor_maps` tensor maps (kTensorMapBytes each, by value).
llvm::Function* declare_kernel(llvm::Module& m, const AnalyzedSpec& spec, const LaunchBounds& bounds, KernelTail tail,
                               const std::string& name, int tensor_maps = 0);

// The PTX name of kernel `fn`'s parameter `i`, which inline PTX uses to take its address.
std::string param_symbol(const llvm::Function* fn, unsigned i);

// Parameter `i` of the tail (KernelTail): the parameters after the spec's params and tensors.
llvm::Value* tail_arg(llvm::Function* fn, const AnalyzedSpec& spec, int i);
// Parameter `i` (BackwardParam) of a kernel declared with KernelTail::backward.
inline llvm::Value* backward_arg(llvm::Function* fn, const AnalyzedSpec& spec, int i) { return tail_arg(fn, spec, i); }

// Builtins, params and tensors (with their launch extents) as the function's IR values.
// `heads_q` null: the grid's y extent (kernels with one CTA row per query head); `batches` null:
// its z extent.
ExprInputs expr_inputs(tile::Emitter& e, const AnalyzedSpec& spec, llvm::Value* batch, llvm::Value* head,
                       llvm::Value* head_kv, llvm::Value* heads_q = nullptr, llvm::Value* batches = nullptr);

KvBoundsInputs kv_bounds_inputs(tile::Emitter& e, const ExprInputs& ex, llvm::Value* q_first, llvm::Value* q_last);

// This CTA's row of the block map: pointers to its tile count and tile list.
struct BlockMapRow {
  llvm::Value* count;  // ptr addrspace(1) to i32
  llvm::Value* tiles;  // ptr addrspace(1) to i32 × ceil(seq_kv / block_n)
};
// The map of a block_m × block_n tiling: one row of ceil(seq_kv / block_n) entries per query tile,
// from the tile lists and counts of a kernel declared with KernelTail::block_map.
BlockMapRow block_map_row(tile::Emitter& e, const AnalyzedSpec& spec, const TileConfig& config, const ExprInputs& ex,
                          llvm::Value* q_tile);

}  // namespace flashjit

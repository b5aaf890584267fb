// dQ summed by the dK/dV kernel (BackwardPlan::fused_dq; FlashAttention-3, Shah et al. 2024, §3.3):
// per streamed query tile, dSᵀ goes through shared memory into a wgmma dQ = dS K, whose fp32 result
// goes through shared memory into the workspace by bulk reductions (compiler/tile/bulk.hpp).
#pragma once

#include "compiler/tile/register_tile.hpp"
#include "templates/bwd/plan.hpp"

namespace flashjit {

struct DqSumInputs {
  llvm::Value* smem;        // i32 .shared address of the kernel's (aligned) shared memory
  llvm::Value* tid;         // %tid.x
  llvm::Value* accum;       // the workspace (BackwardParams::dq_accum)
  llvm::Value* batch_head;  // i32: batch · heads_q + the query head of the tile
  llvm::Value* seq_q;
  // i32, 0 or 1: the dSᵀ buffer of this step (BackwardPass::ds_buffers); null with one buffer.
  llvm::Value* ds_buffer = nullptr;
};

// dSᵀ (pass.rows keys × pass.cols queries, one m16n8 register tile per warp, rounded to the dtype
// as the dK product rounds it) into shared memory at pass.ds.
void store_ds(tile::Emitter& e, const BackwardPass& pass, DType dtype, const DqSumInputs& in, const tile::RegTile& ds);
// After store_ds in every warp: dQ of queries first + [0, pass.cols) over the CTA's keys (K at
// pass.res_qk) added into the workspace. Includes the CTA barrier that publishes dSᵀ.
void add_dq(tile::Emitter& e, const BackwardPass& pass, DType dtype, int d_qk, const DqSumInputs& in,
            llvm::Value* first);
// The float offset (i64) of block (batch_head, m_block, panel) of the workspace: its blocks of
// kDqBlockFloats per (batch, query head, 64 queries of seq_q, 64 columns of `panels`), in
// templates/common/backward_abi.hpp's order. batch_head, m_block and panel are i32.
llvm::Value* dq_block_offset(tile::Emitter& e, llvm::Value* batch_head, llvm::Value* seq_q, llvm::Value* m_block,
                             int panels, llvm::Value* panel);
// Before the kernel returns: the bulk reductions have finished (their shared memory stays valid).
void finish_dq(tile::Emitter& e, const DqSumInputs& in);
// The kernel's compute warps meet: bar.sync 0, or with a producer warpgroup (BackwardPass::producer,
// which never joins them) named barrier kComputeBarrier of pass.compute_threads (PTX ISA §9.7.13.1).
inline constexpr int kComputeBarrier = 3;  // 1 and 2 are tile::sync_warpgroup's
void sync_compute(tile::Emitter& e, const BackwardPass& pass);

}  // namespace flashjit

// dQ inside the dK/dV kernel (FlashAttention-2, Dao 2023, Algorithm 2, line 21): the CTA's dSᵀ
// tile goes through shared memory, dQ_i += dS_ij K_j is one more mma.sync product, and the
// partial sums are added into an fp32 workspace with red.global.add — five products per tile pair
// instead of the separate dQ kernel's seven, at the price of a summation order that varies from
// run to run.
#pragma once

#include "compiler/tile/register_tile.hpp"
#include "compiler/tile/smem_tile.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit {

struct DqAtomic {
  tile::SmemTile ds;      // rows = the CTA's keys, columns = the tile's queries (dSᵀ, the dtype)
  tile::SmemTile k;       // the resident K tile (rows = keys)
  int warps = 0, rows = 0, cols = 0, d_qk = 0;
  DType dtype = DType::bf16;
  llvm::Value *warp = nullptr, *lane = nullptr;
  llvm::Value* warp_row0 = nullptr;  // the first key row of this thread's warp
  llvm::Value* accum = nullptr;      // ptr addrspace(1) to row 0 of this (batch, head)'s [seq_q, d_qk] fp32 rows
  llvm::Value* q0 = nullptr;         // the tile's first query
  llvm::Value* seq_q = nullptr;
};

// Writes dSᵀ (a register tile in the m16n8 C layout over the CTA's keys × the tile's queries),
// rounded to the dtype, into `d.ds`. The caller synchronises before dq_partial reads it.
void store_ds(tile::Emitter& e, const DqAtomic& d, const tile::RegTile& ds);

// dQ[q0 .. q0 + cols) += dS · K over the CTA's keys, added into `d.accum` (rows below seq_q).
void dq_partial(tile::Emitter& e, const DqAtomic& d);

}  // namespace flashjit

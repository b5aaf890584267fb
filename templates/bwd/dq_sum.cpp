#include "templates/bwd/dq_sum.hpp"

#include <algorithm>

#include "compiler/tile/bulk.hpp"
#include "compiler/tile/gpu.hpp"
#include "compiler/tile/mma.hpp"
#include "compiler/tile/wgmma.hpp"
#include "templates/common/backward_abi.hpp"

namespace flashjit {

using llvm::Value;
using tile::SmemTile;

namespace {

// Byte offset of this step's dSᵀ buffer from the kernel's shared memory.
Value* ds_offset(tile::Emitter& e, const BackwardPass& pass, const DqSumInputs& in) {
  if (!in.ds_buffer) return e.c32(pass.ds);
  return e.b.CreateAdd(e.c32(pass.ds), e.b.CreateMul(in.ds_buffer, e.c32(pass.rows * pass.cols * 2)));
}

}  // namespace

// dSᵀ (keys × queries, rounded to the dtype as the dK product rounds it) into the layout of
// compiler/tile/smem_tile.hpp, where the dQ product reads it as an MN-major A operand.
void store_ds(tile::Emitter& e, const BackwardPass& pass, DType dtype, const DqSumInputs& in, const tile::RegTile& ds) {
  auto& B = e.b;
  // Row 16·warp + g (+ 8), chunk nt sits at chunk nt ^ g (the 1024-byte aligned tile's swizzle): one
  // address per thread, XORed with nt · 16, and 1024 bytes on for the row 8 below. Derived from
  // in_loop values, so no address is held across the walk (the kernel is at the register limit).
  Value* tid = tile::in_loop(e, in.tid);
  Value* g = B.CreateAnd(B.CreateLShr(tid, 2), e.c32(7));
  Value* row = B.CreateAdd(B.CreateShl(B.CreateLShr(tid, 5), 4), g);
  Value* at = B.CreateAdd(tile::in_loop(e, in.smem), ds_offset(e, pass, in));
  at = B.CreateAdd(B.CreateAdd(at, B.CreateShl(row, 7)), B.CreateShl(g, 4));  // chunk 0 ^ g
  at = B.CreateAdd(at, B.CreateShl(B.CreateAnd(tid, e.c32(3)), 2));
  for (int nt = 0; nt < pass.cols / 8; ++nt)
    for (int r = 0; r < 2; ++r) {
      // Chunk nt of the row is chunk nt % 8 of panel nt / 8 (64 columns each, rows × 128 bytes apart).
      Value* addr = B.CreateAdd(B.CreateXor(at, e.c32(16 * (nt % 8))), e.c32(1024 * r + 128 * pass.rows * (nt / 8)));
      B.CreateAlignedStore(tile::pack_pair_rn(e, ds[0][nt][2 * r], ds[0][nt][2 * r + 1], dtype),
                           B.CreateIntToPtr(addr, llvm::PointerType::get(e.ctx, 3)), llvm::Align(4));
    }
  tile::fence_proxy_async(e);  // the dQ product's wgmma reads it through the async proxy
}

// dQ of the tile's queries (first + [0, cols)) over this CTA's keys, in units of 64 queries × 64
// columns shared among the warpgroups: each unit's product goes in fp32 to its own block of shared
// memory in the workspace's order (templates/common/backward_abi.hpp) and from there, with one bulk
// reduction by the warpgroup's first thread, into the workspace (FlashAttention-3 §3.3). Only the
// warpgroup waits for its unit; the CTA waits once, for dSᵀ.
void add_dq(tile::Emitter& e, const BackwardPass& pass, DType dtype, int d, const DqSumInputs& in, Value* first) {
  auto& B = e.b;
  // As in store_ds: every address from in_loop values.
  Value* tid = tile::in_loop(e, in.tid);
  Value* smem = tile::in_loop(e, in.smem);
  sync_compute(e, pass);  // every warpgroup's dSᵀ is in shared memory
  const SmemTile ds{B.CreateAdd(smem, ds_offset(e, pass, in)), pass.rows};
  const SmemTile k{B.CreateAdd(smem, e.c32(pass.res_qk)), pass.rows};
  const int groups = pass.warps / 4, blocks = pass.cols / 64, panels = (d + 63) / 64;
  Value* group = B.CreateLShr(tid, 7);
  Value* lane = B.CreateAnd(tid, e.c32(127));  // thread in the warpgroup
  Value* leader = B.CreateICmpEQ(lane, e.c32(0));
  for (int u = 0; u < blocks * panels; ++u) {
    const int mb = u / panels, panel = u % panels, n = std::min(64, d - 64 * panel);
    e.when(B.CreateICmpEQ(group, e.c32(u % groups)), "dq.unit", [&] {  // warpgroup-uniform
      std::vector<Value*> acc = tile::wgmma_mn_major(e, dtype, ds, mb, k, 64 * panel, n, pass.rows / 16);
      Value* block = B.CreateAdd(smem, e.c32(pass.dq + u * kDqBlockFloats * 4));
      // This warpgroup's last reduction from the block must have read it before it is rewritten.
      e.when(leader, "dq.drain", [&] { tile::bulk_wait(e, /*read=*/true); });
      tile::sync_warpgroup(e, group);
      Value* at = B.CreateAdd(block, B.CreateShl(lane, 4));
      auto* v4 = llvm::FixedVectorType::get(e.f32(), 4);
      for (int j = 0; j < n / 8; ++j) {
        Value* x = llvm::UndefValue::get(v4);
        for (int i = 0; i < 4; ++i) x = B.CreateInsertElement(x, acc[size_t(4 * j + i)], uint64_t(i));
        B.CreateAlignedStore(x, B.CreateIntToPtr(B.CreateAdd(at, e.c32(2048 * j)), llvm::PointerType::get(e.ctx, 3)),
                             llvm::Align(16));
      }
      tile::fence_proxy_async(e);  // the bulk reduction reads it through the async proxy
      tile::sync_warpgroup(e, group);
      e.when(leader, "dq.reduce", [&] {
        // Block (batch, head, first / 64 + mb, panel) of the workspace, computed here (in_loop)
        // rather than held in registers across the walk.
        Value* mblock = B.CreateAdd(B.CreateLShr(first, 6), e.c32(mb));
        Value* dst = B.CreateGEP(e.f32(), in.accum, dq_block_offset(e, tile::in_loop(e, in.batch_head), in.seq_q, mblock,
                                                                    panels, e.c32(panel)));
        tile::bulk_reduce_add_f32(e, B.CreatePtrToInt(dst, e.i64()), block, e.c32(n * 64 * 4));
        tile::bulk_commit(e);
      });
    });
  }
}

Value* dq_block_offset(tile::Emitter& e, Value* batch_head, Value* seq_q, Value* m_block, int panels, Value* panel) {
  auto& B = e.b;
  Value* m_blocks = B.CreateLShr(B.CreateAdd(seq_q, e.c32(63)), 6);
  Value* index = B.CreateAdd(B.CreateMul(B.CreateZExt(batch_head, e.i64()), B.CreateZExt(m_blocks, e.i64())),
                             B.CreateZExt(m_block, e.i64()));
  index = B.CreateAdd(B.CreateMul(index, e.c64(panels)), B.CreateZExt(panel, e.i64()));
  return B.CreateMul(index, e.c64(kDqBlockFloats));
}

void sync_compute(tile::Emitter& e, const BackwardPass& pass) {
  if (pass.producer)
    tile::sync_named(e, kComputeBarrier, pass.compute_threads);
  else
    tile::sync_threads(e);
}

void finish_dq(tile::Emitter& e, const DqSumInputs& in) {
  auto& B = e.b;
  e.when(B.CreateICmpEQ(B.CreateAnd(in.tid, e.c32(127)), e.c32(0)), "dq.done", [&] { tile::bulk_wait(e, false); });
}

}  // namespace flashjit

#include "templates/bwd/dq_atomic.hpp"

#include <algorithm>

#include "compiler/tile/mma.hpp"

namespace flashjit {

using llvm::Value;

void store_ds(tile::Emitter& e, const DqAtomic& d, const tile::RegTile& ds) {
  auto& B = e.b;
  Value* lane_g = B.CreateLShr(d.lane, 2);
  Value* t4 = B.CreateAnd(d.lane, e.c32(3));
  for (size_t mt = 0; mt < ds.size(); ++mt)
    for (int r = 0; r < 2; ++r) {
      Value* row = B.CreateAdd(d.warp_row0, B.CreateAdd(lane_g, e.c32(int(16 * mt + 8 * r))));
      for (size_t nt = 0; nt < ds[mt].size(); ++nt) {
        // Columns 8·nt + 2·t4 and + 1: one b32 at byte 4·t4 of 16-byte chunk nt of the row.
        Value* off = B.CreateAdd(d.ds.offset(e, row, e.c32(int(nt))), B.CreateShl(t4, 2));
        Value* pair = tile::pack_pair_rn(e, ds[mt][nt][2 * r], ds[mt][nt][2 * r + 1], d.dtype);
        Value* ptr = B.CreateIntToPtr(B.CreateAdd(d.ds.base, off), llvm::PointerType::get(e.ctx, 3));
        B.CreateAlignedStore(pair, ptr, llvm::Align(4));
      }
    }
}

void dq_partial(tile::Emitter& e, const DqAtomic& d) {
  auto& B = e.b;
  // Warps share the cols × d_qk output: m-tile (16 queries) w % MQ, and every G-th 8-column
  // n-tile from w / MQ on; with fewer warps than m-tiles, warp w takes m-tiles w, w + W, ...
  const int MQ = d.cols / 16, OT = (d.d_qk + 7) / 8;
  const int G = std::max(1, d.warps / MQ), per_warp = std::max(1, MQ / d.warps);
  const int NT = (OT + G - 1) / G;
  Value* mq0 = d.warps >= MQ ? B.CreateURem(d.warp, e.c32(MQ)) : d.warp;
  Value* ng = d.warps >= MQ ? B.CreateUDiv(d.warp, e.c32(MQ)) : e.c32(0);
  Value* l8 = B.CreateAnd(d.lane, e.c32(7));
  Value* bit3 = B.CreateAnd(B.CreateLShr(d.lane, 3), e.c32(1));
  Value* bit4 = B.CreateLShr(d.lane, 4);
  Value* g = B.CreateLShr(d.lane, 2);
  Value* t4 = B.CreateAnd(d.lane, e.c32(3));
  // ldmatrix.trans rows: dS's A fragment (queries × keys) from dSᵀ (keys × queries): lane l gives
  // key row l % 8 + 8·(l / 16) at query chunk 2·mq + (l / 8) % 2 (PTX ISA §9.7.13.4.15).
  Value* a_row = B.CreateAdd(l8, B.CreateShl(bit4, 3));
  // K's B fragment (keys × d columns, .trans, .x2): lanes 0-15 give key rows l % 16 at chunk ot.
  Value* b_row = B.CreateAnd(d.lane, e.c32(15));
  // Addresses are a per-lane offset plus the k-step's rows as an immediate (16 rows of 128 bytes
  // keep the swizzle phase): no per-k-step address stays live across the kv loop.
  for (int m = 0; m < per_warp; ++m) {
    Value* mq = B.CreateAdd(mq0, e.c32(m * d.warps));
    Value* a_addr = B.CreateAdd(d.ds.base, d.ds.offset(e, a_row, B.CreateAdd(B.CreateShl(mq, 1), bit3)));
    for (int i = 0; i < NT; ++i) {
      Value* ot = B.CreateAdd(ng, e.c32(i * G));
      // The last n-tiles of an uneven split exist for some warps only: clamped here (a valid
      // address), skipped at the adds (a warp-uniform branch).
      Value* chunk = B.CreateBinaryIntrinsic(llvm::Intrinsic::umin, ot, e.c32(OT - 1));
      Value* b_addr = B.CreateAdd(d.k.base, d.k.offset(e, b_row, chunk));
      // One n-tile at a time over all k-steps: 4 accumulators live, A re-read per n-tile.
      tile::Acc4 acc{e.cf(0.f), e.cf(0.f), e.cf(0.f), e.cf(0.f)};
      for (int kc = 0; kc < d.rows / 16; ++kc) {
        tile::Frag4 a = tile::ldmatrix_x4(e, a_addr, 2048 * kc, /*trans=*/true);
        auto b = tile::ldmatrix_x2(e, b_addr, 2048 * kc, /*trans=*/true);
        acc = tile::mma_16816(e, d.dtype, a, b[0], b[1], acc);
      }
      e.when(B.CreateICmpULT(ot, e.c32(OT)), "dq.add", [&] {
        for (int j = 0; j < 4; ++j) {
          Value* q = B.CreateAdd(d.q0, B.CreateAdd(B.CreateShl(mq, 4), B.CreateAdd(g, e.c32(8 * (j >> 1)))));
          Value* col = B.CreateAdd(B.CreateShl(ot, 3), B.CreateAdd(B.CreateShl(t4, 1), e.c32(j & 1)));
          e.when(B.CreateICmpSLT(q, d.seq_q), "dq.row", [&] {
            Value* idx = B.CreateAdd(B.CreateMul(B.CreateSExt(q, e.i64()), e.c64(d.d_qk)), B.CreateZExt(col, e.i64()));
            // Unused result: NVPTX emits red.global.add.f32 (PTX ISA §9.7.12.7).
            B.CreateAtomicRMW(llvm::AtomicRMWInst::FAdd, B.CreateGEP(e.f32(), d.accum, idx), acc[j],
                              llvm::MaybeAlign(4), llvm::AtomicOrdering::Monotonic);
          });
        }
      });
    }
  }
}

}  // namespace flashjit

// Tensor-core primitives of sm_80+: ldmatrix, mma.sync m16n8k16, cp.async (PTX ISA §9.7.13, §9.7.9.25).
#pragma once

#include <array>

#include "compiler/tile/emitter.hpp"
#include "compiler/tile/register_tile.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit::tile {

using Frag4 = std::array<llvm::Value*, 4>;  // four b32 registers (A operand, or 2 B operands)

// Shared-memory operands are 32-bit .shared addresses plus a constant byte offset that lands in
// the instruction ([reg+imm]). The NVVM intrinsics take pointers, and LLVM hoists every
// pointer+constant out of the kv loop into its own 64-bit register (≈64 registers at d=128,
// docs/perf-notes.md §4); inline PTX keeps one register per distinct base.
llvm::Value* shared_u32(Emitter& e, llvm::Value* shared_ptr);

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 at [addr + imm]: lane l supplies the row
// address of matrix l / 8; register i of every lane holds its two elements of matrix i (PTX ISA
// §9.7.13.4.15).
Frag4 ldmatrix_x4(Emitter& e, llvm::Value* addr, int imm, bool trans);
// The .x2 form: lanes 0-15 supply the rows of two matrices; registers 0 and 1 hold them.
std::array<llvm::Value*, 2> ldmatrix_x2(Emitter& e, llvm::Value* addr, int imm, bool trans);

// D = A·B + C for one m16n8k16 tile with f32 accumulation; A is 4 b32, B is 2 b32 (PTX ISA
// §9.7.13.4.8 for the fragment layouts: row = lane/4 (+8), column pair = 2·(lane%4)).
Acc4 mma_16816(Emitter& e, DType dtype, const Frag4& a, llvm::Value* b0, llvm::Value* b1, const Acc4& c);

// cp.async.cg.shared.global 16 bytes to [dst + imm]; `valid` = false copies zeros (src-size 0)
// and reads nothing.
void cp_async_16(Emitter& e, llvm::Value* dst, int imm, llvm::Value* src_global, llvm::Value* valid);
// cp.async.ca.shared.global 4 bytes (one f32) to [dst]; `valid` = false writes 0.
void cp_async_4(Emitter& e, llvm::Value* dst, llvm::Value* src_global, llvm::Value* valid);
void cp_async_commit(Emitter& e);
void cp_async_wait(Emitter& e, int pending_groups);

// Two f32 → one b32 of two 16-bit elements (first in the low half) with one cvt.rn.{bf16x2,f16x2}.f32.
llvm::Value* pack_pair_rn(Emitter& e, llvm::Value* lo, llvm::Value* hi, DType dtype);
// Element `half` (0: low) of such a pair, as f32 (bf16: the upper half of an f32; f16: cvt.f32.f16).
llvm::Value* unpack_half(Emitter& e, llvm::Value* pair, int half, DType dtype);
// Every element of `t` rounded to the dtype (as pack_pair_rn rounds it) and held as f32 again.
void round_tile(Emitter& e, RegTile& t, DType dtype);
// Row r (0: g, 1: g + 8) of m-tile mt of `acc`, × mult, stored as dtype pairs at columns
// 8·nt + 2·t4 of `row_ptr` (a pointer to 16-bit elements), for the first `tiles` n-tiles.
void store_row_pairs(Emitter& e, const TileVars& acc, size_t mt, int r, int tiles, llvm::Value* mult, llvm::Value* t4,
                     llvm::Value* row_ptr, DType dtype);

}  // namespace flashjit::tile

#include "compiler/tile/mma.hpp"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include "compiler/tile/inline_ptx.hpp"

#include <string>
#include <vector>

namespace flashjit::tile {

using llvm::Intrinsic::getDeclaration;

namespace {

// ldmatrix reads shared memory written by other threads; it must not move across barriers
// (readonly, so LLVM orders it after every may-write call) nor into divergent code (convergent:
// .sync.aligned needs the whole warp).
llvm::CallInst* ldmatrix_call(Emitter& e, int regs, llvm::Value* addr, int imm, bool trans) {
  const std::string text = "ldmatrix.sync.aligned.m8n8.x" + std::to_string(regs) + (trans ? ".trans" : "") +
                           ".shared.b16 " + asm_reg_list(0, regs) + ", " + asm_address(regs, imm) + ";";
  std::string constraints;
  for (int i = 0; i < regs; ++i) constraints += "=r,";
  constraints += "r";
  std::vector<llvm::Type*> out(regs, e.i32());
  llvm::CallInst* call = inline_ptx(e, llvm::StructType::get(e.ctx, out), {addr}, text, constraints, /*side_effects=*/false);
  call->setOnlyReadsMemory();
  call->setConvergent();
  return call;
}

}  // namespace

llvm::Value* shared_u32(Emitter& e, llvm::Value* shared_ptr) {
  // A .shared address is an offset in the CTA's shared window: it fits 32 bits (PTX ISA §6.4.1).
  return e.b.CreatePtrToInt(shared_ptr, e.i32());
}

Frag4 ldmatrix_x4(Emitter& e, llvm::Value* addr, int imm, bool trans) {
  llvm::Value* r = ldmatrix_call(e, 4, addr, imm, trans);
  Frag4 out;
  for (unsigned i = 0; i < 4; ++i) out[i] = e.b.CreateExtractValue(r, i);
  return out;
}

std::array<llvm::Value*, 2> ldmatrix_x2(Emitter& e, llvm::Value* addr, int imm, bool trans) {
  llvm::Value* r = ldmatrix_call(e, 2, addr, imm, trans);
  return {e.b.CreateExtractValue(r, 0), e.b.CreateExtractValue(r, 1)};
}

Acc4 mma_16816(Emitter& e, DType dtype, const Frag4& a, llvm::Value* b0, llvm::Value* b1, const Acc4& c) {
  llvm::Value* r;
  if (dtype == DType::bf16) {
    r = e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_bf16),
                       {a[0], a[1], a[2], a[3], b0, b1, c[0], c[1], c[2], c[3]});
  } else {
    auto* h2 = llvm::FixedVectorType::get(e.b.getHalfTy(), 2);
    auto cast = [&](llvm::Value* v) { return e.b.CreateBitCast(v, h2); };
    r = e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f32_f32),
                       {cast(a[0]), cast(a[1]), cast(a[2]), cast(a[3]), cast(b0), cast(b1), c[0], c[1], c[2], c[3]});
  }
  Acc4 out;
  for (unsigned i = 0; i < 4; ++i) out[i] = e.b.CreateExtractValue(r, i);
  return out;
}

void cp_async_16(Emitter& e, llvm::Value* dst, int imm, llvm::Value* src, llvm::Value* valid) {
  // src-size 0 makes the copy write 16 zero bytes (PTX ISA §9.7.9.25.3.1, "cp.async", src-size).
  llvm::Value* bytes = e.b.CreateSelect(valid, e.c32(16), e.c32(0));
  inline_ptx(e, e.b.getVoidTy(), {dst, src, bytes}, "cp.async.cg.shared.global " + asm_address(0, imm) + ", [$1], 16, $2;",
             "r,l,r,~{memory}");
}

void cp_async_4(Emitter& e, llvm::Value* dst, llvm::Value* src, llvm::Value* valid) {
  // .cg is 16 bytes only; .ca takes 4, 8 or 16 (PTX ISA §9.7.9.25.3.1).
  llvm::Value* bytes = e.b.CreateSelect(valid, e.c32(4), e.c32(0));
  inline_ptx(e, e.b.getVoidTy(), {dst, src, bytes}, "cp.async.ca.shared.global [$0], [$1], 4, $2;", "r,l,r,~{memory}");
}

void cp_async_commit(Emitter& e) {
  e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_cp_async_commit_group), {});
}

void cp_async_wait(Emitter& e, int pending) {
  e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_cp_async_wait_group), {e.c32(pending)});
}

llvm::Value* pack_pair_rn(Emitter& e, llvm::Value* lo, llvm::Value* hi, DType dtype) {
  // cvt.rn.bf16x2.f32 d, a, b puts a in the upper half (PTX ISA §9.7.9.21), hence (hi, lo).
  auto id = dtype == DType::bf16 ? llvm::Intrinsic::nvvm_ff2bf16x2_rn : llvm::Intrinsic::nvvm_ff2f16x2_rn;
  llvm::Value* v = e.b.CreateCall(getDeclaration(&e.module, id), {hi, lo});
  return e.b.CreateBitCast(v, e.i32());
}

llvm::Value* unpack_half(Emitter& e, llvm::Value* pair, int half, DType dtype) {
  auto& B = e.b;
  if (dtype == DType::bf16) {
    llvm::Value* bits = half ? B.CreateAnd(pair, e.c32(static_cast<int>(0xFFFF0000u))) : B.CreateShl(pair, 16);
    return B.CreateBitCast(bits, e.f32());
  }
  llvm::Value* h16 = B.CreateTrunc(half ? B.CreateLShr(pair, 16) : pair, B.getInt16Ty());
  return B.CreateFPExt(B.CreateBitCast(h16, B.getHalfTy()), e.f32());
}

void store_row_pairs(Emitter& e, const TileVars& acc, size_t mt, int r, int tiles, llvm::Value* mult, llvm::Value* t4,
                     llvm::Value* row_ptr, DType dtype) {
  auto& B = e.b;
  for (int nt = 0; nt < tiles; ++nt) {
    llvm::Value* x = B.CreateFMul(B.CreateLoad(e.f32(), acc.vars[mt][size_t(nt)][2 * r]), mult);
    llvm::Value* y = B.CreateFMul(B.CreateLoad(e.f32(), acc.vars[mt][size_t(nt)][2 * r + 1]), mult);
    llvm::Value* col = B.CreateAdd(e.c32(nt * 8), B.CreateShl(t4, 1));
    B.CreateAlignedStore(pack_pair_rn(e, x, y, dtype), B.CreateGEP(B.getInt16Ty(), row_ptr, col), llvm::Align(4));
  }
}

void round_tile(Emitter& e, RegTile& t, DType dtype) {
  for (auto& row : t)
    for (Acc4& a : row)
      for (int r = 0; r < 2; ++r) {
        llvm::Value* pair = pack_pair_rn(e, a[2 * r], a[2 * r + 1], dtype);
        a[2 * r] = unpack_half(e, pair, 0, dtype);
        a[2 * r + 1] = unpack_half(e, pair, 1, dtype);
      }
}

}  // namespace flashjit::tile

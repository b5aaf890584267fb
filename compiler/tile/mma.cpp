#include "compiler/tile/mma.hpp"

#include <llvm/IR/IntrinsicsNVPTX.h>

namespace flashjit::tile {

using llvm::Intrinsic::getDeclaration;

Frag4 ldmatrix_x4(Emitter& e, llvm::Value* ptr, bool trans) {
  auto id = trans ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_trans_b16
                  : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_b16;
  // LLVM 19 declares ldmatrix over any pointer type (overloaded); older versions over addrspace(3).
  llvm::Function* f = llvm::Intrinsic::isOverloaded(id) ? getDeclaration(&e.module, id, {ptr->getType()})
                                                        : getDeclaration(&e.module, id);
  llvm::Value* r = e.b.CreateCall(f, {ptr});
  Frag4 out;
  for (unsigned i = 0; i < 4; ++i) out[i] = e.b.CreateExtractValue(r, i);
  return out;
}

std::array<llvm::Value*, 2> ldmatrix_x2(Emitter& e, llvm::Value* ptr, bool trans) {
  auto id = trans ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x2_trans_b16
                  : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x2_b16;
  llvm::Function* f = llvm::Intrinsic::isOverloaded(id) ? getDeclaration(&e.module, id, {ptr->getType()})
                                                        : getDeclaration(&e.module, id);
  llvm::Value* r = e.b.CreateCall(f, {ptr});
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

void cp_async_16(Emitter& e, llvm::Value* dst, llvm::Value* src, llvm::Value* valid) {
  // src-size 0 makes the copy write 16 zero bytes (PTX ISA §9.7.9.25.3.1, "cp.async", src-size).
  llvm::Value* bytes = e.b.CreateSelect(valid, e.c32(16), e.c32(0));
  e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_cp_async_cg_shared_global_16_s), {dst, src, bytes});
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

}  // namespace flashjit::tile

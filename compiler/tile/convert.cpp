#include "compiler/tile/convert.hpp"

namespace flashjit::tile {

static llvm::Type* half_type(Emitter& e, DType dtype) {
  return dtype == DType::f16 ? e.b.getHalfTy() : e.b.getBFloatTy();
}

std::pair<llvm::Value*, llvm::Value*> unpack_pair(Emitter& e, llvm::Value* packed, DType dtype) {
  if (dtype == DType::bf16) {
    // bf16 is the top half of an f32, so widening is a shift: exact and cheaper than cvt.
    llvm::Value* lo = e.b.CreateShl(packed, 16);
    llvm::Value* hi = e.b.CreateAnd(packed, e.c32(static_cast<int>(0xFFFF0000u)));
    return {e.b.CreateBitCast(lo, e.f32()), e.b.CreateBitCast(hi, e.f32())};
  }
  llvm::Value* v = e.b.CreateBitCast(packed, llvm::FixedVectorType::get(e.b.getHalfTy(), 2));
  return {e.b.CreateFPExt(e.b.CreateExtractElement(v, uint64_t{0}), e.f32()),
          e.b.CreateFPExt(e.b.CreateExtractElement(v, uint64_t{1}), e.f32())};
}

llvm::Value* pack_pair(Emitter& e, llvm::Value* lo, llvm::Value* hi, DType dtype) {
  llvm::Type* h = half_type(e, dtype);
  llvm::Value* v = llvm::PoisonValue::get(llvm::FixedVectorType::get(h, 2));
  v = e.b.CreateInsertElement(v, e.b.CreateFPTrunc(lo, h), uint64_t{0});
  v = e.b.CreateInsertElement(v, e.b.CreateFPTrunc(hi, h), uint64_t{1});
  return e.b.CreateBitCast(v, e.i32());
}

}  // namespace flashjit::tile

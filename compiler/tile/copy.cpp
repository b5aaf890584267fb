#include "compiler/tile/copy.hpp"

namespace flashjit::tile {

void copy_tile_to_shared(Emitter& e, const TileCopy& c, llvm::Value* tid) {
  auto& b = e.b;
  const int chunks_per_row = c.cols / 8;
  const int chunks = c.rows * chunks_per_row;
  llvm::Type* vec = llvm::FixedVectorType::get(e.i32(), 4);
  for (int first = 0; first < chunks; first += c.threads) {
    llvm::Value* chunk = b.CreateAdd(tid, e.c32(first));
    auto body = [&] {
      llvm::Value* r = b.CreateUDiv(chunk, e.c32(chunks_per_row));
      llvm::Value* col = b.CreateMul(b.CreateURem(chunk, e.c32(chunks_per_row)), e.c32(8));
      llvm::Value* row = b.CreateAdd(c.row0, r);
      llvm::Value* in_range = b.CreateICmpSLT(row, c.row_end);
      // Clamp the address so the (predicated-off) load never forms an out-of-bounds pointer.
      llvm::Value* safe_row = b.CreateSelect(in_range, row, e.c32(0));
      llvm::Value* offset = b.CreateAdd(b.CreateMul(b.CreateSExt(safe_row, e.i64()), c.row_stride),
                                        b.CreateZExt(col, e.i64()));
      llvm::Value* src = b.CreateGEP(b.getInt16Ty(), c.global, offset);
      llvm::Value* data = llvm::ConstantAggregateZero::get(vec);
      llvm::BasicBlock* before = b.GetInsertBlock();
      llvm::BasicBlock* load_bb = llvm::BasicBlock::Create(e.ctx, "copy.load", e.fn);
      llvm::BasicBlock* join = llvm::BasicBlock::Create(e.ctx, "copy.join", e.fn);
      b.CreateCondBr(in_range, load_bb, join);
      b.SetInsertPoint(load_bb);
      llvm::Value* loaded = b.CreateAlignedLoad(vec, src, llvm::Align(16));
      b.CreateBr(join);
      b.SetInsertPoint(join);
      llvm::PHINode* phi = b.CreatePHI(vec, 2);
      phi->addIncoming(data, before);
      phi->addIncoming(loaded, load_bb);
      llvm::Value* dst_off = b.CreateAdd(b.CreateMul(r, e.c32(c.smem_stride)), col);
      llvm::Value* dst = b.CreateGEP(b.getInt16Ty(), c.smem, dst_off);
      if (c.smem_stride % 8 == 0) {
        b.CreateAlignedStore(phi, dst, llvm::Align(16));
      } else {  // padded rows are only 4-byte aligned: four 32-bit stores
        for (int w = 0; w < 4; ++w)
          b.CreateAlignedStore(b.CreateExtractElement(phi, uint64_t(w)), b.CreateGEP(e.i32(), dst, e.c32(w)),
                               llvm::Align(4));
      }
    };
    if (first + c.threads <= chunks) body();
    else e.when(b.CreateICmpULT(chunk, e.c32(chunks)), "copy.tail", body);
  }
}

}  // namespace flashjit::tile

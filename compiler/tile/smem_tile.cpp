#include "compiler/tile/smem_tile.hpp"

namespace flashjit::tile {

llvm::Value* SmemTile::offset(Emitter& e, llvm::Value* row, llvm::Value* chunk) const {
  auto& B = e.b;
  llvm::Value* line = B.CreateAdd(B.CreateMul(B.CreateLShr(chunk, 3), e.c32(rows)), row);
  llvm::Value* swz = B.CreateXor(B.CreateAnd(chunk, e.c32(7)), B.CreateAnd(row, e.c32(7)));
  return B.CreateAdd(B.CreateShl(line, 7), B.CreateShl(swz, 4));
}

FragAddr::FragAddr(Emitter& e, int rows_, llvm::Value* r, llvm::Value* bit) : rows(rows_) {
  for (int q = 0; q < 4; ++q) off[q] = SmemTile{nullptr, rows}.offset(e, r, e.b.CreateAdd(e.c32(2 * q), bit));
}

}  // namespace flashjit::tile

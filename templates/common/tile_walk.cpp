#include "templates/common/tile_walk.hpp"

#include "templates/common/forward_abi.hpp"

namespace flashjit {

TileWalk::TileWalk(tile::Emitter& e, llvm::Value* first, llvm::Value* count, llvm::Value* list, int depth)
    : first_(first), count_(count), list_(list), depth_(depth), look_ahead_(list && depth >= 2) {
  if (!look_ahead_) return;
  auto& B = e.b;
  for (int k = 0; k < depth_; ++k) {
    ahead_.push_back(e.var(e.i32(), "entry", e.c32(0)));
    e.when(B.CreateICmpSLT(e.c32(k), count_), "entry", [&] { B.CreateStore(load_entry(e, e.c32(k)), ahead_[k]); });
  }
}

llvm::Value* TileWalk::load_entry(tile::Emitter& e, llvm::Value* i) const {
  return e.b.CreateAlignedLoad(e.i32(), e.b.CreateGEP(e.i32(), list_, i), llvm::Align(4));
}

TileWalk::Step TileWalk::begin_step(tile::Emitter& e, llvm::Value* j) {
  Step s;
  if (!look_ahead_) return s;
  auto& B = e.b;
  s.now = entry(e, j, 0);
  s.last = entry(e, j, depth_ - 1);
  // Shift, and fetch step j + depth's entry (clamped: the loop runs only when count ≥ 1).
  for (int k = 0; k + 1 < depth_; ++k) B.CreateStore(B.CreateLoad(e.i32(), ahead_[k + 1]), ahead_[k]);
  llvm::Value* next = B.CreateBinaryIntrinsic(llvm::Intrinsic::smin, B.CreateAdd(j, e.c32(depth_)),
                                              B.CreateSub(count_, e.c32(1)));
  B.CreateStore(load_entry(e, next), ahead_[depth_ - 1]);
  return s;
}

llvm::Value* TileWalk::entry(tile::Emitter& e, llvm::Value* j, int k, llvm::Value* cached) {
  if (cached) return cached;
  if (!list_) return nullptr;
  return look_ahead_ ? e.b.CreateLoad(e.i32(), ahead_[k]) : load_entry(e, e.b.CreateAdd(j, e.c32(k)));
}

llvm::Value* TileWalk::tile(tile::Emitter& e, llvm::Value* i, llvm::Value* entry) const {
  if (!list_) return e.b.CreateAdd(first_, i);
  return e.b.CreateAnd(entry, e.c32(static_cast<int>(~kTileFullBit)));
}

llvm::Value* TileWalk::listed_full(tile::Emitter& e, llvm::Value* entry) const {
  return e.b.CreateICmpSLT(entry, e.c32(0));
}

}  // namespace flashjit

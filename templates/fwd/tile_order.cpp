#include "templates/fwd/tile_order.hpp"

#include <llvm/IR/Intrinsics.h>

namespace flashjit {

OrderedTile ordered_tile(tile::Emitter& e, const AttentionSpec& spec, llvm::Value* i, llvm::Value* q_tiles,
                         llvm::Value* units, llvm::Value* seq_kv, llvm::Value* gqa_group) {
  auto& B = e.b;
  auto umax = [&](llvm::Value* a, llvm::Value* b) { return B.CreateBinaryIntrinsic(llvm::Intrinsic::umax, a, b); };
  const int rows = (16 << 20) / ((spec.head_dim_qk + spec.head_dim_v) * 2);
  llvm::Value* size = umax(B.CreateUDiv(B.CreateMul(e.c32(rows), gqa_group), umax(seq_kv, e.c32(1))), e.c32(1));
  llvm::Value* per_group = B.CreateMul(size, q_tiles);
  llvm::Value* group = B.CreateUDiv(i, per_group);
  llvm::Value* first = B.CreateMul(group, size);
  llvm::Value* here = B.CreateBinaryIntrinsic(llvm::Intrinsic::umin, size, B.CreateSub(units, first));
  llvm::Value* r = B.CreateSub(i, B.CreateMul(group, per_group));
  return {B.CreateSub(B.CreateSub(q_tiles, e.c32(1)), B.CreateUDiv(r, here)),
          B.CreateAdd(first, B.CreateURem(r, here))};
}

}  // namespace flashjit

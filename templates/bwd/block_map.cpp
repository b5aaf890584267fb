// The backward's block maps: for masks the closed form does not describe exactly (tensor reads),
// the dQ kernel walks a list of key tiles per query tile and the dK/dV kernel a list of query tiles
// per key tile (FlexAttention's kv_indices and q_indices), built before them by these kernels.
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>

#include "compiler/tile/gpu.hpp"
#include "templates/bwd/backward.hpp"
#include "templates/common/backward_abi.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/common/tile_map.hpp"

namespace flashjit {

BlockMapRow backward_map_row(tile::Emitter& e, const BackwardPlan& plan, bool keys, const ExprInputs& ex,
                             llvm::Value* row_tile) {
  auto& B = e.b;
  const BackwardPass& pass = keys ? plan.kv : plan.q;
  llvm::Value* tiles = backward_arg(e.fn, *plan.spec, keys ? kBwdMapKvTiles : kBwdMapQTiles);
  llvm::Value* counts = backward_arg(e.fn, *plan.spec, keys ? kBwdMapKvCounts : kBwdMapQCounts);
  llvm::Value* seq_rows = keys ? ex.seq_kv : ex.seq_q;
  llvm::Value* seq_cols = keys ? ex.seq_q : ex.seq_kv;
  llvm::Value* row_tiles = B.CreateUDiv(B.CreateAdd(seq_rows, e.c32(pass.rows - 1)), e.c32(pass.rows));
  llvm::Value* col_tiles = B.CreateUDiv(B.CreateAdd(seq_cols, e.c32(pass.cols - 1)), e.c32(pass.cols));
  const BlockMapPolicy& policy = plan.spec->block_map;
  llvm::Value* map = policy.per_batch ? ex.b : e.c32(0);
  if (policy.per_head) map = B.CreateAdd(B.CreateMul(map, ex.heads_q), ex.h);
  llvm::Value* row = B.CreateAdd(B.CreateMul(B.CreateZExt(map, e.i64()), B.CreateZExt(row_tiles, e.i64())),
                                 B.CreateZExt(row_tile, e.i64()));
  return {B.CreateGEP(e.i32(), counts, row), B.CreateGEP(e.i32(), tiles, B.CreateMul(row, B.CreateZExt(col_tiles, e.i64())))};
}

void emit_backward_map(llvm::Module& module, const BackwardPlan& plan, bool keys, const std::string& name) {
  using llvm::Value;
  llvm::Function* fn = declare_kernel(module, *plan.spec, {kMapThreads, 1}, KernelTail::backward, name);
  tile::Emitter e(module, fn);
  auto& B = e.b;
  B.SetInsertPoint(llvm::BasicBlock::Create(e.ctx, "entry", fn));
  Value* row_tile = tile::block_id(e, 0);
  Value* head = tile::block_id(e, 1);   // 0 unless the map is per head
  Value* batch = tile::block_id(e, 2);  // 0 unless the map is per batch
  ExprInputs ex = expr_inputs(e, *plan.spec, batch, head, B.CreateUDiv(head, fn->getArg(kParamGroup)));
  return_if_idle(e, plan.spec->block_map, head, batch);
  const BlockMapRow row = backward_map_row(e, plan, keys, ex, row_tile);
  TileMapRow m;
  m.spec = plan.spec.get();
  m.keys = keys;
  const BackwardPass& pass = keys ? plan.kv : plan.q;
  m.rows = pass.rows, m.cols = pass.cols, m.threads = kMapThreads;
  m.ex = ex;
  m.tid = tile::thread_id(e);
  m.row_tile = row_tile;
  m.list = row.tiles;
  m.count = row.count;
  emit_tile_map_row(e, m);
  B.CreateRetVoid();
}

}  // namespace flashjit

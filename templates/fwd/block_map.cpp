#include "templates/fwd/block_map.hpp"

#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>

#include "compiler/tile/gpu.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/common/kernel_args.hpp"
#include "templates/common/kv_bounds.hpp"
#include "templates/common/tile_map.hpp"

namespace flashjit {

llvm::Function* emit_block_map(llvm::Module& module, const ForwardPlan& plan, const std::string& entry) {
  llvm::Function* fn =
      declare_kernel(module, *plan.spec, {plan.threads, plan.min_ctas_per_sm}, KernelTail::block_map, entry + "_blockmap");
  tile::Emitter e(module, fn);
  auto& B = e.b;
  B.SetInsertPoint(llvm::BasicBlock::Create(e.ctx, "entry", fn));
  using llvm::Value;
  const int BM = plan.config.block_m, BN = plan.config.block_n, T = plan.threads;

  Value* tid = tile::thread_id(e);
  Value* q_tile = tile::block_id(e, 0);
  Value* head = tile::block_id(e, 1);   // 0 unless the map is per head
  Value* batch = tile::block_id(e, 2);  // 0 unless the map is per batch
  Value* head_kv = B.CreateUDiv(head, fn->getArg(kParamGroup));
  ExprInputs ex = expr_inputs(e, *plan.spec, batch, head, head_kv);
  return_if_idle(e, plan.spec->block_map, head, batch);
  BlockMapRow row = block_map_row(e, *plan.spec, plan.config, ex, q_tile);
  TileMapRow m;
  m.spec = plan.spec.get();
  m.rows = BM, m.cols = BN, m.threads = T;
  m.ex = ex;
  m.tid = tid;
  m.row_tile = q_tile;
  m.list = row.tiles;
  m.count = row.count;
  emit_tile_map_row(e, m);
  B.CreateRetVoid();
  return fn;
}

}  // namespace flashjit

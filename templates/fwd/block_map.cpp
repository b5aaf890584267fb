#include "templates/fwd/block_map.hpp"

#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>

#include "compiler/tile/gpu.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/common/kernel_args.hpp"
#include "templates/common/kv_bounds.hpp"

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
  // Launched on the forward's grid (so gridDim gives heads_q and batch for tensor extents);
  // when the mask depends on neither b nor h, only the (b = 0, h = 0) CTAs build the one map.
  llvm::Value* idle = B.getFalse();
  if (!plan.spec->block_map.per_head) idle = B.CreateOr(idle, B.CreateICmpNE(head, e.c32(0)));
  if (!plan.spec->block_map.per_batch) idle = B.CreateOr(idle, B.CreateICmpNE(batch, e.c32(0)));
  llvm::BasicBlock* work = llvm::BasicBlock::Create(e.ctx, "work", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(e.ctx, "idle", fn);
  B.CreateCondBr(idle, done, work);
  B.SetInsertPoint(done);
  B.CreateRetVoid();
  B.SetInsertPoint(work);
  Value* seq_q = ex.seq_q;
  Value* seq_kv = ex.seq_kv;
  const TileRows rows = tile_rows(e, q_tile, BM, seq_q);
  Value* q_start = rows.first;
  KvBounds bounds = emit_kv_bounds(e, &plan.spec->kv_range, kv_bounds_inputs(e, ex, rows.first, rows.last));
  const TileSpan tiles = covering_tiles(e, bounds, BN);
  BlockMapRow row = block_map_row(e, plan.spec->block_map, plan.config, ex, q_tile);
  Value* zero = e.c32(0);
  Value* is_leader = B.CreateICmpEQ(tid, zero);
  llvm::AllocaInst* count = e.var(e.i32(), "count", zero);
  Value* last_q = B.CreateSub(seq_q, e.c32(1));
  Value* last_kv = B.CreateSub(seq_kv, e.c32(1));

  e.loop(tiles.first, tiles.end, 1, "tile", [&](Value* t) {
    Value* n0 = B.CreateMul(t, e.c32(BN));
    Value* in_full = tile_in_full_range(e, bounds, n0, BN);
    llvm::AllocaInst* any = e.var(e.i32(), "any");
    llvm::AllocaInst* all = e.var(e.i32(), "all");
    B.CreateStore(B.CreateZExt(in_full, e.i32()), any);
    B.CreateStore(B.CreateZExt(in_full, e.i32()), all);
    e.when(B.CreateNot(in_full), "eval", [&] {
      // Element k of the BM × BN tile: row k / BN, key k % BN. A row past seq_q may be anything;
      // a key past seq_kv is masked (so its tile is never full).
      Value* a = zero;
      Value* l = e.c32(1);
      for (int first = 0; first < BM * BN; first += T) {
        Value* k = B.CreateAdd(tid, e.c32(first));
        Value* q = B.CreateAdd(q_start, B.CreateUDiv(k, e.c32(BN)));
        Value* kv = B.CreateAdd(n0, B.CreateURem(k, e.c32(BN)));
        Value* q_ok = B.CreateICmpSLT(q, seq_q);
        Value* kv_ok = B.CreateICmpSLT(kv, seq_kv);
        ExprInputs at = ex;
        at.q = B.CreateBinaryIntrinsic(llvm::Intrinsic::smin, q, last_q);
        at.kv = B.CreateBinaryIntrinsic(llvm::Intrinsic::smin, kv, last_kv);
        Value* vis = B.CreateAnd(kv_ok, lower_expr(e, *plan.spec->mask, at));
        if (first + T > BM * BN) q_ok = B.CreateAnd(q_ok, B.CreateICmpULT(k, e.c32(BM * BN)));
        a = B.CreateOr(a, B.CreateZExt(B.CreateAnd(q_ok, vis), e.i32()));
        l = B.CreateAnd(l, B.CreateZExt(B.CreateOr(B.CreateNot(q_ok), vis), e.i32()));
      }
      // bar.red.or / bar.red.and (PTX ISA §9.7.12.1): the CTA-wide verdict in one barrier each.
      B.CreateStore(B.CreateCall(llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::nvvm_barrier0_or), {a}), any);
      B.CreateStore(B.CreateCall(llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::nvvm_barrier0_and), {l}), all);
    });
    Value* any_v = B.CreateICmpNE(B.CreateLoad(e.i32(), any), zero);
    Value* all_v = B.CreateICmpNE(B.CreateLoad(e.i32(), all), zero);
    e.when(B.CreateAnd(is_leader, any_v), "append", [&] {
      Value* c = B.CreateLoad(e.i32(), count);
      Value* entry = B.CreateOr(t, B.CreateSelect(all_v, e.c32(static_cast<int>(kTileFullBit)), zero));
      B.CreateAlignedStore(entry, B.CreateGEP(e.i32(), row.tiles, c), llvm::Align(4));
      B.CreateStore(B.CreateAdd(c, e.c32(1)), count);
    });
  });
  e.when(is_leader, "count", [&] { B.CreateAlignedStore(B.CreateLoad(e.i32(), count), row.count, llvm::Align(4)); });
  B.CreateRetVoid();
  return fn;
}

}  // namespace flashjit

#include "templates/common/tile_map.hpp"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include "templates/common/forward_abi.hpp"
#include "templates/common/kernel_args.hpp"

namespace flashjit {

void emit_tile_map_row(tile::Emitter& e, const TileMapRow& m) {
  using llvm::Value;
  auto& B = e.b;
  const int R = m.rows, C = m.cols, T = m.threads;
  Value* seq_rows = m.keys ? m.ex.seq_kv : m.ex.seq_q;
  Value* seq_cols = m.keys ? m.ex.seq_q : m.ex.seq_kv;
  const TileRows rows = tile_rows(e, m.row_tile, R, seq_rows);
  Value* row0 = rows.first;
  // The transposed range reads the key position where the forward's reads the query, with the
  // lengths exchanged (compiler/dsl/kv_range.hpp, derive_q_range).
  KvBoundsInputs in = kv_bounds_inputs(e, m.ex, rows.first, rows.last);
  if (m.keys) std::swap(in.seq_q, in.seq_kv);
  KvBounds bounds = emit_kv_bounds(e, m.keys ? &m.spec->q_range : &m.spec->kv_range, in);
  const TileSpan tiles = covering_tiles(e, bounds, C);
  Value* zero = e.c32(0);
  Value* is_leader = B.CreateICmpEQ(m.tid, zero);
  llvm::AllocaInst* count = e.var(e.i32(), "count", zero);
  Value* last_q = B.CreateSub(m.ex.seq_q, e.c32(1));
  Value* last_kv = B.CreateSub(m.ex.seq_kv, e.c32(1));

  e.loop(tiles.first, tiles.end, 1, "tile", [&](Value* t) {
    Value* c0 = B.CreateMul(t, e.c32(C));
    Value* in_full = tile_in_full_range(e, bounds, c0, C);
    llvm::AllocaInst* any = e.var(e.i32(), "any");
    llvm::AllocaInst* all = e.var(e.i32(), "all");
    B.CreateStore(B.CreateZExt(in_full, e.i32()), any);
    B.CreateStore(B.CreateZExt(in_full, e.i32()), all);
    e.when(B.CreateNot(in_full), "eval", [&] {
      // Element k of the R × C tile: row k / C, column k % C. A row past its sequence may be
      // anything; a column past its sequence is masked (so its tile is never full).
      Value* a = zero;
      Value* l = e.c32(1);
      for (int first = 0; first < R * C; first += T) {
        Value* k = B.CreateAdd(m.tid, e.c32(first));
        Value* r = B.CreateAdd(row0, B.CreateUDiv(k, e.c32(C)));
        Value* c = B.CreateAdd(c0, B.CreateURem(k, e.c32(C)));
        Value* q = m.keys ? c : r;
        Value* kv = m.keys ? r : c;
        Value* row_ok = B.CreateICmpSLT(r, seq_rows);
        Value* col_ok = B.CreateICmpSLT(c, seq_cols);
        ExprInputs at = m.ex;
        at.q = B.CreateBinaryIntrinsic(llvm::Intrinsic::smin, q, last_q);
        at.kv = B.CreateBinaryIntrinsic(llvm::Intrinsic::smin, kv, last_kv);
        Value* vis = B.CreateAnd(col_ok, lower_expr(e, *m.spec->mask, at));
        if (first + T > R * C) row_ok = B.CreateAnd(row_ok, B.CreateICmpULT(k, e.c32(R * C)));
        a = B.CreateOr(a, B.CreateZExt(B.CreateAnd(row_ok, vis), e.i32()));
        l = B.CreateAnd(l, B.CreateZExt(B.CreateOr(B.CreateNot(row_ok), vis), e.i32()));
      }
      // bar.red.or / bar.red.and (PTX ISA §9.7.12.1): the CTA-wide verdict in one barrier each.
      B.CreateStore(B.CreateCall(llvm::Intrinsic::getDeclaration(&e.module, llvm::Intrinsic::nvvm_barrier0_or), {a}), any);
      B.CreateStore(B.CreateCall(llvm::Intrinsic::getDeclaration(&e.module, llvm::Intrinsic::nvvm_barrier0_and), {l}), all);
    });
    Value* any_v = B.CreateICmpNE(B.CreateLoad(e.i32(), any), zero);
    Value* all_v = B.CreateICmpNE(B.CreateLoad(e.i32(), all), zero);
    e.when(B.CreateAnd(is_leader, any_v), "append", [&] {
      Value* c = B.CreateLoad(e.i32(), count);
      Value* entry = B.CreateOr(t, B.CreateSelect(all_v, e.c32(static_cast<int>(kTileFullBit)), zero));
      B.CreateAlignedStore(entry, B.CreateGEP(e.i32(), m.list, c), llvm::Align(4));
      B.CreateStore(B.CreateAdd(c, e.c32(1)), count);
    });
  });
  e.when(is_leader, "count", [&] { B.CreateAlignedStore(B.CreateLoad(e.i32(), count), m.count, llvm::Align(4)); });
}

void return_if_idle(tile::Emitter& e, const BlockMapPolicy& policy, llvm::Value* head, llvm::Value* batch) {
  auto& B = e.b;
  llvm::Value* idle = B.getFalse();
  if (!policy.per_head) idle = B.CreateOr(idle, B.CreateICmpNE(head, e.c32(0)));
  if (!policy.per_batch) idle = B.CreateOr(idle, B.CreateICmpNE(batch, e.c32(0)));
  llvm::BasicBlock* work = llvm::BasicBlock::Create(e.ctx, "work", e.fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(e.ctx, "idle", e.fn);
  B.CreateCondBr(idle, done, work);
  B.SetInsertPoint(done);
  B.CreateRetVoid();
  B.SetInsertPoint(work);
}

}  // namespace flashjit

#include "templates/fwd/sequence.hpp"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>

#include "templates/common/forward_abi.hpp"

namespace flashjit {

SequenceView sequence_view(tile::Emitter& e, llvm::Function* fn, llvm::Value* batch, bool varlen, bool paged) {
  auto& B = e.b;
  auto arg = [&](int i) { return fn->getArg(static_cast<unsigned>(i)); };
  SequenceView s;
  s.seq_q = arg(kParamSeqQ);
  s.seq_kv = arg(kParamSeqKv);
  if (varlen) {  // sequence b: tokens [cu[b], cu[b + 1])
    auto at = [&](int param, llvm::Value* i) {
      return B.CreateAlignedLoad(e.i32(), B.CreateGEP(e.i32(), arg(param), i), llvm::Align(4));
    };
    llvm::Value* next = B.CreateAdd(batch, e.c32(1));
    s.q0 = at(kParamCuSeqlensQ, batch);
    s.kv0 = at(kParamCuSeqlensKv, batch);
    s.seq_q = B.CreateSub(at(kParamCuSeqlensQ, next), s.q0);
    s.seq_kv = B.CreateSub(at(kParamCuSeqlensKv, next), s.kv0);
  }
  if (paged) {  // keys: seqused_kv[b] when given (else cu_seqlens_kv's or seq_kv); pages: row b of the table
    llvm::Value* used = arg(kParamSeqUsedKv);
    llvm::BasicBlock* from = B.GetInsertBlock();
    llvm::BasicBlock* load = llvm::BasicBlock::Create(e.ctx, "seqused", fn);
    llvm::BasicBlock* join = llvm::BasicBlock::Create(e.ctx, "seqused.done", fn);
    B.CreateCondBr(B.CreateICmpNE(used, llvm::ConstantPointerNull::get(llvm::PointerType::get(e.ctx, 1))), load, join);
    B.SetInsertPoint(load);
    llvm::Value* n = B.CreateAlignedLoad(e.i32(), B.CreateGEP(e.i32(), used, batch), llvm::Align(4));
    B.CreateBr(join);
    B.SetInsertPoint(join);
    llvm::PHINode* keys = B.CreatePHI(e.i32(), 2, "seq_kv");
    keys->addIncoming(s.seq_kv, from);
    keys->addIncoming(n, load);
    s.seq_kv = keys;
    s.page_table = B.CreateGEP(e.i32(), arg(kParamBlockTable),
                               B.CreateMul(B.CreateZExt(batch, e.i64()), B.CreateZExt(arg(kParamPagesPerSeq), e.i64())));
  }
  return s;
}

}  // namespace flashjit

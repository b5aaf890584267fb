// The state every tile primitive emits into: one kernel function being built with an IRBuilder.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

namespace flashjit::tile {

struct Emitter {
  llvm::LLVMContext& ctx;
  llvm::Module& module;
  llvm::Function* fn;
  llvm::IRBuilder<> b;

  Emitter(llvm::Module& m, llvm::Function* f) : ctx(m.getContext()), module(m), fn(f), b(m.getContext()) {}

  llvm::Type* f32() { return b.getFloatTy(); }
  llvm::Type* i32() { return b.getInt32Ty(); }
  llvm::Type* i64() { return b.getInt64Ty(); }
  llvm::Value* c32(int v) { return b.getInt32(static_cast<uint32_t>(v)); }
  llvm::Value* c64(int64_t v) { return b.getInt64(static_cast<uint64_t>(v)); }
  llvm::Value* cf(float v) { return llvm::ConstantFP::get(f32(), v); }
  llvm::Value* neg_inf() { return llvm::ConstantFP::getInfinity(f32(), /*Negative=*/true); }

  // A scalar variable living in an entry-block alloca: SROA/mem2reg turn it into a register, so
  // templates can write straight-line code with mutable state and no hand-built phi nodes.
  llvm::AllocaInst* var(llvm::Type* type, const char* name, llvm::Value* init = nullptr);

  // A counted loop `for (i = begin; i < end; i += step)` around body(i); i is i32.
  template <class Body>
  void loop(llvm::Value* begin, llvm::Value* end, int step, const char* name, Body body);

  // The same with a step known only at run time (positive).
  template <class Body>
  void loop(llvm::Value* begin, llvm::Value* end, llvm::Value* step, const char* name, Body body);

  // if (cond) then_body(); — no else.
  template <class Body>
  void when(llvm::Value* cond, const char* name, Body then_body);
};

template <class Body>
void Emitter::loop(llvm::Value* begin, llvm::Value* end, int step, const char* name, Body body) {
  loop(begin, end, c32(step), name, body);
}

template <class Body>
void Emitter::loop(llvm::Value* begin, llvm::Value* end, llvm::Value* step, const char* name, Body body) {
  llvm::BasicBlock* pre = b.GetInsertBlock();
  llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx, std::string(name) + ".head", fn);
  llvm::BasicBlock* body_bb = llvm::BasicBlock::Create(ctx, std::string(name) + ".body", fn);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx, std::string(name) + ".exit", fn);
  b.CreateBr(head);
  b.SetInsertPoint(head);
  llvm::PHINode* i = b.CreatePHI(i32(), 2, name);
  i->addIncoming(begin, pre);
  b.CreateCondBr(b.CreateICmpSLT(i, end), body_bb, exit);
  b.SetInsertPoint(body_bb);
  body(static_cast<llvm::Value*>(i));
  llvm::Value* next = b.CreateAdd(i, step, std::string(name) + ".next", /*HasNUW=*/false, /*HasNSW=*/true);
  i->addIncoming(next, b.GetInsertBlock());
  b.CreateBr(head);
  b.SetInsertPoint(exit);
}

template <class Body>
void Emitter::when(llvm::Value* cond, const char* name, Body then_body) {
  llvm::BasicBlock* then_bb = llvm::BasicBlock::Create(ctx, std::string(name) + ".then", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx, std::string(name) + ".done", fn);
  b.CreateCondBr(cond, then_bb, done);
  b.SetInsertPoint(then_bb);
  then_body();
  b.CreateBr(done);
  b.SetInsertPoint(done);
}

}  // namespace flashjit::tile

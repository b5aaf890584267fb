#include "compiler/tile/mbarrier.hpp"

#include "compiler/tile/inline_ptx.hpp"

namespace flashjit::tile {

void mbarrier_init(Emitter& e, llvm::Value* bar, int count) {
  inline_ptx(e, e.b.getVoidTy(), {bar, e.c32(count)}, "mbarrier.init.shared.b64 [$0], $1;", "r,r,~{memory}");
}

void mbarrier_arrive(Emitter& e, llvm::Value* bar) {
  inline_ptx(e, e.b.getVoidTy(), {bar}, "{ .reg .b64 st; mbarrier.arrive.shared.b64 st, [$0]; }", "r,~{memory}");
}

void mbarrier_arrive_expect_tx(Emitter& e, llvm::Value* bar, int bytes) {
  inline_ptx(e, e.b.getVoidTy(), {bar, e.c32(bytes)},
             "{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [$0], $1; }", "r,r,~{memory}");
}

void cp_async_mbarrier_arrive(Emitter& e, llvm::Value* bar) {
  inline_ptx(e, e.b.getVoidTy(), {bar}, "cp.async.mbarrier.arrive.noinc.shared.b64 [$0];", "r,~{memory}");
}

void mbarrier_wait(Emitter& e, llvm::Value* bar, llvm::Value* parity) {
  auto& B = e.b;
  llvm::BasicBlock* spin = llvm::BasicBlock::Create(e.ctx, "mbar.wait", e.fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(e.ctx, "mbar.done", e.fn);
  B.CreateBr(spin);
  B.SetInsertPoint(spin);
  llvm::Value* ok = inline_ptx(e, e.i32(), {bar, parity},
                               "{ .reg .pred p; mbarrier.try_wait.parity.shared.b64 p, [$1], $2; selp.u32 $0, 1, 0, p; }",
                               "=r,r,r,~{memory}");
  B.CreateCondBr(B.CreateICmpNE(ok, e.c32(0)), done, spin);
  B.SetInsertPoint(done);
}

void set_max_registers(Emitter& e, int count, bool increase) {
  const std::string op = increase ? "inc" : "dec";
  inline_ptx(e, e.b.getVoidTy(), {}, "setmaxnreg." + op + ".sync.aligned.u32 " + std::to_string(count) + ";",
             "~{memory}");
}

}  // namespace flashjit::tile

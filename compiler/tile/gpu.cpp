#include "compiler/tile/gpu.hpp"

#include "compiler/tile/inline_ptx.hpp"
#include <llvm/IR/IntrinsicsNVPTX.h>

namespace flashjit::tile {

using llvm::Intrinsic::getDeclaration;

llvm::Value* thread_id(Emitter& e) {
  return e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x), {}, "tid");
}

llvm::Value* block_id(Emitter& e, int axis) {
  static const llvm::Intrinsic::ID ids[] = {llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x,
                                            llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                            llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z};
  return e.b.CreateCall(getDeclaration(&e.module, ids[axis]), {}, "ctaid");
}

llvm::Value* grid_dim(Emitter& e, int axis) {
  static const llvm::Intrinsic::ID ids[] = {llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x,
                                            llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y,
                                            llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_z};
  return e.b.CreateCall(getDeclaration(&e.module, ids[axis]), {}, "nctaid");
}

void sync_threads(Emitter& e) { e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_barrier0), {}); }

void sync_warpgroup(Emitter& e, llvm::Value* group) {
  e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_barrier_sync_cnt),
                 {e.b.CreateAdd(group, e.c32(1)), e.c32(128)});
}

void sync_named(Emitter& e, int id, int threads) { sync_named(e, e.c32(id), threads); }

void sync_named(Emitter& e, llvm::Value* id, int threads) {
  e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_barrier_sync_cnt), {id, e.c32(threads)});
}

void arrive_named(Emitter& e, llvm::Value* id, int threads) {
  inline_ptx(e, e.b.getVoidTy(), {id}, "bar.arrive $0, " + std::to_string(threads) + ";", "r,~{memory}");
}

llvm::Value* shfl_idx(Emitter& e, llvm::Value* x, int lane) {
  return e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_shfl_sync_idx_i32),
                        {e.c32(-1), x, e.c32(lane), e.c32(0x1f)});
}

void launch_dependents(Emitter& e) {
  inline_ptx(e, e.b.getVoidTy(), {}, "griddepcontrol.launch_dependents;", "~{memory}");
}

void wait_prerequisites(Emitter& e) { inline_ptx(e, e.b.getVoidTy(), {}, "griddepcontrol.wait;", "~{memory}"); }

llvm::Value* shfl_xor(Emitter& e, llvm::Value* x, int lane_mask) {
  // c = 0x1f: the whole warp is one segment (PTX ISA §9.7.8.6, "shfl.sync", operand c).
  return e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_shfl_sync_bfly_f32),
                        {e.c32(-1), x, e.c32(lane_mask), e.c32(0x1f)});
}

llvm::Value* exp2_fast(Emitter& e, llvm::Value* x) {
  return e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_ex2_approx_ftz_f), {x});
}

llvm::Value* log2_fast(Emitter& e, llvm::Value* x) {
  return e.b.CreateCall(getDeclaration(&e.module, llvm::Intrinsic::nvvm_lg2_approx_ftz_f), {x});
}

llvm::Value* tanh_fast(Emitter& e, llvm::Value* x) {
  return inline_ptx(e, e.f32(), {x}, "tanh.approx.f32 $0, $1;", "=f,f", /*side_effects=*/false);
}

llvm::Value* in_loop(Emitter& e, llvm::Value* x) {
  return inline_ptx(e, e.i32(), {x}, "mov.b32 $0, $1;", "=r,r");
}

llvm::Value* shared_base(Emitter& e) {
  const char* name = "flashjit_smem";
  if (auto* g = e.module.getNamedGlobal(name)) return g;
  auto* type = llvm::ArrayType::get(e.b.getInt8Ty(), 0);
  auto* g = new llvm::GlobalVariable(e.module, type, false, llvm::GlobalValue::ExternalLinkage, nullptr, name,
                                     nullptr, llvm::GlobalValue::NotThreadLocal, /*AddressSpace=*/3);
  g->setAlignment(llvm::Align(1024));  // wgmma 128-byte-swizzle atoms are 1024-byte aligned
  return g;
}

}  // namespace flashjit::tile

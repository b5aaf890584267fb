// Thread-level GPU primitives: indices, barriers, warp shuffles, fast exp2/log2 (PTX ISA §9.7).
#pragma once

#include "compiler/tile/emitter.hpp"

namespace flashjit::tile {

llvm::Value* thread_id(Emitter& e);            // %tid.x
llvm::Value* block_id(Emitter& e, int axis);   // %ctaid.{x,y,z}
llvm::Value* grid_dim(Emitter& e, int axis);   // %nctaid.{x,y,z}
void sync_threads(Emitter& e);                 // bar.sync 0
// bar.sync 1 + group, 128: the 128 threads of warpgroup `group` (0 or 1) only (PTX ISA §9.7.13.1).
void sync_warpgroup(Emitter& e, llvm::Value* group);
// bar.sync id, threads: waits until `threads` threads (whole warps) have arrived at barrier `id`
// (PTX ISA §9.7.13.1); ids 1 and 2 are sync_warpgroup's.
void sync_named(Emitter& e, int id, int threads);
void sync_named(Emitter& e, llvm::Value* id, int threads);
// bar.arrive id, threads: counts the calling warp's threads at barrier `id` without waiting: the
// handing side of a hand-over whose receiving side waits with sync_named (PTX ISA §9.7.13.1).
// LLVM 19 has no intrinsic for it.
void arrive_named(Emitter& e, llvm::Value* id, int threads);
// Programmatic dependent launch (PTX ISA, "griddepcontrol": sm_90, PTX 7.8).
// launch_dependents: a grid launched after this one with programmatic stream serialization may
// start once every CTA of this grid has issued it or exited — its CTAs become resident (and run
// their prologue) while this grid's last CTAs finish. It makes nothing of this grid visible.
void launch_dependents(Emitter& e);  // griddepcontrol.launch_dependents
// wait_prerequisites: blocks until the grids this one depends on have completed and their memory
// is visible; a no-op in a grid launched without that attribute.
void wait_prerequisites(Emitter& e);  // griddepcontrol.wait
// shfl.sync.bfly.b32 over the full warp (PTX ISA §9.7.8.6).
llvm::Value* shfl_xor(Emitter& e, llvm::Value* x, int lane_mask);
// shfl.sync.idx.b32 over the full warp: lane `lane`'s x (i32).
llvm::Value* shfl_idx(Emitter& e, llvm::Value* x, int lane);
// ex2.approx.ftz.f32: 2 ulp, flushes denormals; llvm.exp2 does not lower to it in LLVM 19.
llvm::Value* exp2_fast(Emitter& e, llvm::Value* x);
// lg2.approx.ftz.f32.
llvm::Value* log2_fast(Emitter& e, llvm::Value* x);
// tanh.approx.f32 (sm_75+, PTX ISA §9.7.3.22): one SFU instruction, ~2^-11 relative error; what
// FlashAttention's softcap uses (cutlass::fast_tanh). LLVM 19 has no intrinsic for it.
llvm::Value* tanh_fast(Emitter& e, llvm::Value* x);
// `x` (i32) through an empty asm statement with side effects: a value LLVM cannot hoist out of the
// loop it is emitted in. Addresses derived from it stay one register plus immediate offsets inside
// the loop, instead of one loop-invariant register each, live across the whole loop.
llvm::Value* in_loop(Emitter& e, llvm::Value* x);
// The kernel's dynamic shared memory (`extern __shared__`), declared 1024-byte aligned, as an
// addrspace(3) pointer. wgmma kernels still round the base up at run time (templates/fwd/plan.hpp).
llvm::Value* shared_base(Emitter& e);

}  // namespace flashjit::tile

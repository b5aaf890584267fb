// Producer/consumer pipeline primitives (FlashAttention-3 §3.1): shared-memory mbarriers (PTX ISA
// §9.7.13.15), 64-bit objects whose phase completes when the expected count of arrivals has
// arrived and which threads wait on by phase parity — a pipeline uses two per stage, "full",
// arrived at when a stage's copies have landed, and "empty", arrived at when its readers are done
// with it — and setmaxnreg, which moves registers between warpgroups.
#pragma once

#include "compiler/tile/emitter.hpp"

namespace flashjit::tile {

// mbarrier.init: the barrier at shared address `bar` (8-byte aligned) expects `count` arrivals per
// phase. One thread initialises; a CTA barrier must follow before any other thread uses it.
void mbarrier_init(Emitter& e, llvm::Value* bar, int count);
// mbarrier.arrive (release): one arrival from this thread.
void mbarrier_arrive(Emitter& e, llvm::Value* bar);
// mbarrier.arrive.expect_tx (PTX ISA, "mbarrier.arrive", sm_90): one arrival that also raises the
// phase's transaction count by `bytes`, which the asynchronous copies signalling this barrier
// (complete_tx) count back down; the phase completes when both reach zero.
void mbarrier_arrive_expect_tx(Emitter& e, llvm::Value* bar, int bytes);
// cp.async.mbarrier.arrive.noinc (§9.7.9.25.3.2): one arrival, made when every cp.async this
// thread issued before it has landed; counted in the barrier's expected count (noinc).
void cp_async_mbarrier_arrive(Emitter& e, llvm::Value* bar);
// Spins on mbarrier.try_wait.parity (acquire) until the phase of parity `parity` (i32, 0 or 1)
// has completed: phases alternate parity, starting with 0.
void mbarrier_wait(Emitter& e, llvm::Value* bar, llvm::Value* parity);

// setmaxnreg.{inc,dec}.sync.aligned.u32 (PTX ISA §9.7.17.1, sm_90a): this warpgroup's registers
// per thread become `count` (24–256, a multiple of 8); every thread of the warpgroup executes it.
void set_max_registers(Emitter& e, int count, bool increase);

}  // namespace flashjit::tile

// Bulk asynchronous reductions from shared to global memory, done by the TMA unit (sm_90,
// PTX ISA §9.7.9.25.4, cp.reduce.async.bulk): FlashAttention-3's way of adding a CTA's fp32 dQ
// tile into a global accumulator without one atomic per element.
#pragma once

#include "compiler/tile/emitter.hpp"

namespace flashjit::tile {

// global[0, bytes) += shared[0, bytes) in fp32, asynchronously (bulk_group completion). Both
// addresses 16-byte aligned, `bytes` a multiple of 16. The shared source must have been published
// to the async proxy (fence_proxy_async) by the threads that wrote it.
void bulk_reduce_add_f32(Emitter& e, llvm::Value* global_ptr, llvm::Value* shared_addr, llvm::Value* bytes);
// cp.async.bulk.commit_group: this thread's bulk operations since the last commit form a group.
void bulk_commit(Emitter& e);
// cp.async.bulk.wait_group.read 0: this thread's groups have finished reading shared memory (it
// may be overwritten); `read` false also waits for their writes to global memory.
void bulk_wait(Emitter& e, bool read);

}  // namespace flashjit::tile

// Bulk asynchronous copies done by the TMA unit (sm_90, PTX ISA §9.7.9.25): tensor tiles from
// global into shared memory described by a tensor map (cp.async.bulk.tensor, FlashAttention-3's
// loads), and reductions from shared to global memory (cp.reduce.async.bulk, its way of adding a
// CTA's fp32 dQ tile into a global accumulator without one atomic per element).
#pragma once

#include <array>
#include <string>

#include "compiler/tile/emitter.hpp"

namespace flashjit::tile {

// The generic address of the tensor map passed by value as kernel parameter `param` (PTX names
// it "<kernel>_param_<index>"): the address of a kernel parameter is in the .param space and
// cvta.param makes it generic (PTX ISA, "Kernel Function Parameters" and cvta), the form
// cp.async.bulk.tensor takes.
llvm::Value* tensor_map_address(Emitter& e, const std::string& param);
// cp.async.bulk.tensor.4d (PTX ISA, "cp.async.bulk.tensor"): the box of `map` at coordinates `at`
// (innermost first) into shared memory at `dst`, its bytes counted against mbarrier `bar`
// (complete_tx), elements outside the tensor zero-filled. Whatever layout the map's swizzle
// gives lands at `dst`, which a 128-byte swizzle needs 1024-byte aligned.
void tensor_load_4d(Emitter& e, llvm::Value* dst, llvm::Value* map, const std::array<llvm::Value*, 4>& at,
                    llvm::Value* bar);

// cp.async.bulk.tensor.4d, shared to global (PTX ISA, "cp.async.bulk.tensor"): the box of `map` at
// coordinates `at` from shared memory at `src` (laid out as the map's swizzle reads it, 1024-byte
// aligned for the 128-byte swizzle), as a bulk_group operation; elements outside the tensor are
// not written. `src` must have been published to the async proxy (fence_proxy_async).
void tensor_store_4d(Emitter& e, llvm::Value* src, llvm::Value* map, const std::array<llvm::Value*, 4>& at);

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

// Checks a forward call (shapes, strides, alignment, params, tensors and their index ranges)
// and packs the kernel's parameters in the order the template declares them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "compiler/analyzed_spec.hpp"
#include "flashjit/flashjit.hpp"
#include "templates/common/backward_abi.hpp"
#include "templates/common/forward_abi.hpp"

namespace flashjit::rt {

// The product of non-negative `factors` (a buffer size), or Error(usage) "<what> overflows int64"
// when it does not fit: a wrapped size would allocate a small buffer that the kernels overrun.
int64_t checked_product(std::initializer_list<int64_t> factors, const std::string& what);

struct ForwardLaunch {
  ForwardParams fixed{};
  // One 8-byte slot per spec param (i32 or f32 in its low bytes) and per tensor (a pointer).
  std::vector<uint64_t> extra;
  std::vector<void*> slots;  // kernelParams for cuLaunchKernel; points into this object
};

// What a block map depends on besides tensor contents, so that a map built once is refused by a
// call it does not fit: the problem's sizes, the tile sizes its lists are cut at, and the values of
// the spec's `params` params (the first slots of `launch.extra`).
std::vector<uint64_t> block_map_key(const ProblemShape& s, std::initializer_list<int> tile_sizes,
                                    const ForwardLaunch& launch, size_t params);

// Throws Error(usage) naming the offending argument and what is allowed. When the i32 arithmetic
// of the mask's closed-form kv range could wrap at these sizes, the kernel is told to visit every
// key instead.
// `both_ranges`: the launch also reads the transposed ranges (the backward), checked alike.
void pack_forward(const AnalyzedSpec& spec, const ForwardArgs& a, ForwardLaunch& out, bool both_ranges = false);

struct BackwardLaunch {
  ForwardLaunch forward;  // its slots end with the backward's (templates/common/backward_abi.hpp)
  BackwardParams fixed{};
  // The workspace slots: set before launching (the slots point into `fixed`).
  void set_workspace(float* delta, float* dq_accum) { fixed.delta = delta, fixed.dq_accum = dq_accum; }
  void set_maps(int32_t* q_tiles, int32_t* q_counts, int32_t* kv_tiles, int32_t* kv_counts) {
    fixed.map_q_tiles = q_tiles, fixed.map_q_counts = q_counts;
    fixed.map_kv_tiles = kv_tiles, fixed.map_kv_counts = kv_counts;
  }
};

// Checks a backward call as pack_forward checks a forward (messages say "backward: "), plus d_o,
// dq, dk, dv and lse, and packs every kernel parameter. BackwardLaunch must not move afterwards.
void pack_backward(const AnalyzedSpec& spec, const BackwardArgs& a, BackwardLaunch& out);

}  // namespace flashjit::rt

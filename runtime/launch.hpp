// Checks a forward call (shapes, strides, alignment, params, tensors and their index ranges)
// and packs the kernel's parameters in the order the template declares them.
#pragma once

#include <vector>

#include "compiler/dsl/kv_range.hpp"
#include "compiler/dsl/spec.hpp"
#include "flashjit/flashjit.hpp"
#include "templates/forward_abi.hpp"

namespace flashjit::rt {

struct ForwardLaunch {
  ForwardParams fixed{};
  // One 8-byte slot per spec param (i32 or f32 in its low bytes) and per tensor (a pointer).
  std::vector<uint64_t> extra;
  std::vector<void*> slots;  // kernelParams for cuLaunchKernel; points into this object
};

// Throws Error(usage) naming the offending argument and what is allowed. `range` is the mask's
// closed form (null without a mask): when its i32 arithmetic could wrap at these sizes, the
// kernel is told to visit every key instead.
void pack_forward(const dsl::Spec& spec, const dsl::KvRange* range, const ForwardArgs& a, ForwardLaunch& out);

}  // namespace flashjit::rt

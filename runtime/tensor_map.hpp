// The tensor maps a forward kernel that loads with the TMA unit takes (CompiledKernel::tensor_maps,
// templates/common/forward_abi.hpp), encoded per launch from the caller's tensors.
#pragma once

#include <array>

#include "flashjit/flashjit.hpp"
#include "runtime/cuda_types.hpp"

namespace flashjit::rt {

// Q's, K's and V's maps (kMapQ, kMapK, kMapV) for `kernel` at this launch. A stride the TMA unit
// cannot describe (zero over more than one row, head or batch; 2^40 bytes or more) is
// Error(usage) naming the tensor, the stride and FLASHJIT_TMA=off, which builds kernels without
// tensor maps. Call with the launch's context current.
std::array<cu::CUtensorMap, 3> encode_tensor_maps(const CompiledKernel& kernel, const ForwardArgs& args,
                                                  int head_dim_qk, int head_dim_v, bool fp16);

}  // namespace flashjit::rt

// The tensor maps a forward kernel that loads with the TMA unit takes (CompiledKernel::tensor_maps,
// templates/common/forward_abi.hpp), encoded per launch from the caller's tensors.
#pragma once

#include <array>

#include "flashjit/flashjit.hpp"
#include "runtime/cuda_types.hpp"
#include "templates/common/forward_abi.hpp"

namespace flashjit::rt {

// One tensor as the kernel's loads see it, in cuTensorMapEncodeTiled's terms: 4-d, innermost
// first (head dim, seq, heads, batch), strides in bytes of the outer three.
struct TensorMapShape {
  unsigned long long dims[4];
  unsigned long long strides[3];
};
// `t` viewed as [batch, seq, heads, dim] of 16-bit elements. A stride the TMA unit cannot describe
// (zero over more than one row, head or batch; 2^40 bytes or more) is Error(usage) naming the tensor
// `name`, the stride and FLASHJIT_TMA=off, which builds kernels without tensor maps. A stride over a
// single row, head or batch is never stepped and becomes 16 bytes; an empty extent one row.
TensorMapShape tensor_map_shape(const char* name, const Tensor& t, int64_t dim, int64_t seq, int64_t heads,
                                int64_t batch);

// The first kernel.tensor_maps of Q's, K's, V's and O's maps (kMapQ, kMapK, kMapV, kMapO) for
// `kernel` at this launch, each box one 64-column panel of a tile (block_m rows for Q, block_n for
// K and V, one compute warp's block_m / num_warps for O), 128-byte swizzled like the shared panels.
// Call with the launch's context current.
std::array<cu::CUtensorMap, kMapMost> encode_tensor_maps(const CompiledKernel& kernel, const ForwardArgs& args,
                                                         int head_dim_qk, int head_dim_v, bool fp16);

}  // namespace flashjit::rt

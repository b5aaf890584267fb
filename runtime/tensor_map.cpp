#include "runtime/tensor_map.hpp"

#include <algorithm>
#include <string>

#include "runtime/driver.hpp"
#include "templates/common/forward_abi.hpp"

namespace flashjit::rt {

TensorMapShape tensor_map_shape(const char* name, const Tensor& t, int64_t dim, int64_t seq, int64_t heads,
                                int64_t batch) {
  const int64_t extents[3] = {seq, heads, batch};
  const int64_t strides[3] = {t.stride[1], t.stride[2], t.stride[0]};
  static const char* what[3] = {"stride[1] (seq)", "stride[2] (heads)", "stride[0] (batch)"};
  TensorMapShape s{{static_cast<unsigned long long>(dim), 1, 1, 1}, {}};
  for (int i = 0; i < 3; ++i) {
    s.dims[i + 1] = static_cast<unsigned long long>(std::max<int64_t>(extents[i], 1));
    const int64_t b = strides[i] * 2;
    if (extents[i] > 1 && (b == 0 || b >= (int64_t(1) << 40)))
      throw Error(ErrorKind::usage,
                  std::string("forward: ") + name + "." + what[i] + " is " + std::to_string(strides[i]) +
                      " elements over " + std::to_string(extents[i]) + "; this kernel " +
                      (std::string(name) == "o" ? "stores " : "loads ") + name +
                      " with the TMA unit, whose tensor maps take strides of 16 bytes to 2^40 bytes (set "
                      "FLASHJIT_TMA=off for kernels that copy with cp.async)");
    s.strides[i] = static_cast<unsigned long long>(extents[i] > 1 ? b : 16);
  }
  return s;
}

namespace {

cu::CUtensorMap encode(const char* name, const Tensor& t, int64_t dim, int64_t seq, int64_t heads, int64_t batch,
                       int box_rows, bool fp16) {
  const TensorMapShape s = tensor_map_shape(name, t, dim, seq, heads, batch);
  const unsigned box[4] = {kTensorMapPanel, static_cast<unsigned>(box_rows), 1, 1};
  const unsigned steps[4] = {1, 1, 1, 1};
  cu::CUtensorMap map{};
  const cu::CUresult r = cu::driver().cuTensorMapEncodeTiled(
      &map, fp16 ? cu::CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : cu::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, t.data, s.dims,
      s.strides, box, steps, cu::CU_TENSOR_MAP_INTERLEAVE_NONE, cu::CU_TENSOR_MAP_SWIZZLE_128B,
      cu::CU_TENSOR_MAP_L2_PROMOTION_L2_256B, cu::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r == cu::CUDA_SUCCESS) return map;  // the message below is built only for a failure
  cu::check(r, (std::string("cuTensorMapEncodeTiled(") + name + ", dims " + std::to_string(s.dims[0]) + "x" +
                std::to_string(s.dims[1]) + "x" + std::to_string(s.dims[2]) + "x" + std::to_string(s.dims[3]) +
                ", strides " + std::to_string(s.strides[0]) + "/" + std::to_string(s.strides[1]) + "/" +
                std::to_string(s.strides[2]) + " bytes)")
                   .c_str());
  return map;
}

}  // namespace

std::array<cu::CUtensorMap, kMapMost> encode_tensor_maps(const CompiledKernel& kernel, const ForwardArgs& a,
                                                         int head_dim_qk, int head_dim_v, bool fp16) {
  std::array<cu::CUtensorMap, kMapMost> maps{
      encode("q", a.q, head_dim_qk, a.seq_q, a.heads_q, a.batch, kernel.config.block_m, fp16),
      encode("k", a.k, head_dim_qk, a.seq_kv, a.heads_kv, a.batch, kernel.config.block_n, fp16),
      encode("v", a.v, head_dim_v, a.seq_kv, a.heads_kv, a.batch, kernel.config.block_n, fp16), cu::CUtensorMap{}};
  if (kernel.tensor_maps > kMapO)
    maps[kMapO] = encode("o", a.o, head_dim_v, a.seq_q, a.heads_q, a.batch,
                         kernel.config.block_m / kernel.config.num_warps, fp16);
  return maps;
}

}  // namespace flashjit::rt

// The backward kernels' parameter list: the forward's (forward_abi.hpp: q, k, v, o, lse, their
// strides, sizes, scale), then the spec's params and tensors, then these. Shared by the template
// (which reads them) and the runtime (which passes them), so the two cannot drift apart.
#pragma once

#include <cstdint>

namespace flashjit {

// Grids (templates/bwd/): the pre-pass x = tiles of 16 query rows, y = query heads, z = batch;
// the dK/dV kernel x = key tiles, y = KV heads, z = batch (it loops over the group's query heads
// itself, so GQA sums are deterministic); the dQ kernel x = query tiles, y = query heads, z = batch.
struct BackwardParams {
  const void* d_o;  // [batch, seq_q, heads_q, d_v], strides below
  void* dq;         // written: same shape as q
  void* dk;         // written: same shape as k
  void* dv;         // written: same shape as v
  float* delta;     // workspace [batch, heads_q, seq_q] fp32: D = rowsum(dO ∘ O), written by the pre-pass
  // workspace of dq_accum_floats() fp32, zeroed, for dQ summed by the dK/dV kernel
  // (BackwardPlan::fused_dq); null otherwise. Per (batch, query head, block of 64 queries, panel of
  // 64 columns of d_qk) one block of 4096 floats in wgmma's accumulator order, so that a warpgroup
  // adds its whole 64 × 64 product with one bulk reduction: float 4·(128·j + t) + i is register
  // 4j + i of thread t, i.e. row 16·(t / 32) + (t % 32) / 4 + 8·(i / 2), column 8j + 2·(t % 4) +
  // i % 2 (PTX ISA §9.7.15.5.2, the m64nNk16 D layout).
  float* dq_accum;
  // Masks with a block map (BlockMapPolicy::needed): the dQ kernel's (key tiles per query tile) and
  // the dK/dV kernel's (query tiles per key tile), built by the map kernels in the layout of
  // forward_abi.hpp's map; null otherwise.
  int32_t* map_q_tiles;
  int32_t* map_q_counts;
  int32_t* map_kv_tiles;
  int32_t* map_kv_counts;
  int64_t do_stride[3], dq_stride[3], dk_stride[3], dv_stride[3];
};

inline constexpr int kDqBlockFloats = 64 * 64;
inline int64_t dq_accum_floats(int64_t batch, int64_t heads_q, int64_t seq_q, int d_qk) {
  return batch * heads_q * ((seq_q + 63) / 64) * ((d_qk + 63) / 64) * kDqBlockFloats;
}

// Indices relative to the first parameter after the spec's params and tensors.
enum BackwardParam : int {
  kBwdDo = 0, kBwdDq, kBwdDk, kBwdDv, kBwdDelta, kBwdDqAccum, kBwdMapQTiles, kBwdMapQCounts, kBwdMapKvTiles, kBwdMapKvCounts,
  kBwdStrides,                 // 12 × i64: d_o(b,s,h), dq(b,s,h), dk(b,s,h), dv(b,s,h)
  kBwdCount = kBwdStrides + 12
};

// Fills `slots` (kBwdCount pointers into `p`) as cuLaunchKernel's kernelParams wants them.
inline void backward_param_slots(BackwardParams& p, void* slots[kBwdCount]) {
  slots[kBwdDo] = &p.d_o;
  slots[kBwdDq] = &p.dq;
  slots[kBwdDk] = &p.dk;
  slots[kBwdDv] = &p.dv;
  slots[kBwdDelta] = &p.delta;
  slots[kBwdDqAccum] = &p.dq_accum;
  slots[kBwdMapQTiles] = &p.map_q_tiles;
  slots[kBwdMapQCounts] = &p.map_q_counts;
  slots[kBwdMapKvTiles] = &p.map_kv_tiles;
  slots[kBwdMapKvCounts] = &p.map_kv_counts;
  int64_t* strides[4] = {p.do_stride, p.dq_stride, p.dk_stride, p.dv_stride};
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 3; ++i) slots[kBwdStrides + 3 * t + i] = &strides[t][i];
}

}  // namespace flashjit

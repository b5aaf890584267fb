// The forward kernel's parameter list: shared by the template (which reads them) and the runtime
// (which passes them), so the two cannot drift apart.
#pragma once

#include <cstdint>

namespace flashjit {

// Grid: x = query tiles of block_m rows × num_splits, y = query heads, z = batch. Block: num_warps × 32.
// Strides are in elements for [batch, seq, head]; the head-dim stride is 1.
struct ForwardParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;  // may be null
  int64_t q_stride[3], k_stride[3], v_stride[3], o_stride[3];
  int32_t seq_q, seq_kv;
  int32_t group;       // heads_q / heads_kv
  float scale_log2;    // softmax scale × log2(e): the kernel works in the exp2 domain
  int32_t range_ok;    // 0: the mask's closed-form kv range may wrap i32 here: visit every key
  // Split-KV (Flash-Decoding, Dao et al. 2023): with num_splits > 1, CTA x = split · q_tiles + tile
  // walks the split-th of num_splits equal runs of its key tiles and writes that run's normalised O
  // and LSE here in fp32; the combine kernel (templates/fwd/combine.cpp) merges them into o and lse.
  int32_t num_splits;  // 1: no split, o and lse are written directly
  float* partial_o;    // [num_splits, batch, heads_q, seq_q, d_v]
  float* partial_lse;  // [num_splits, batch, heads_q, seq_q], natural log
  // Varlen (packed sequences, Target::varlen): sequence b is tokens [cu[b], cu[b + 1]) of q/o
  // (cu_seqlens_q) and of k/v (cu_seqlens_kv); seq_q and seq_kv are then the total tokens, the batch
  // stride is not used, lse is [heads_q, seq_q] and the partials' rows are (split, head, token).
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_kv;
  // Paged K/V (Target::paged): key n of sequence b is row n % page_size of page
  // block_table[b · pages_per_seq + n / page_size]; k and v's batch stride is the page stride.
  // seqused_kv (may be null): sequence b's key count, else seq_kv for every sequence.
  const int32_t* block_table;
  int32_t page_size, pages_per_seq;
  const int32_t* seqused_kv;
  // The grid's y and z extents: query heads (K/V heads under GQA packing) and batch. A persistent
  // kernel (ForwardPlan::persistent) walks the (query tile, head, batch) tiles from any grid and
  // cannot read them from its own.
  int32_t grid_heads, grid_batch;
  // A persistent kernel's tile counter, zero at launch: each CTA takes its first tile from its
  // index and every later one from here (an atomic add), so the tiles start in order wherever
  // they run. Null for other kernels.
  int32_t* tile_counter;
};
// The combine kernel: one CTA per query row, its warps sharing the row's splits; grid x = seq_q,
// y = query heads, z = batch. At most kMaxSplits splits (FlashAttention-2's cap, flash_api.cpp).
// Its shared memory: the splits' weights, two floats per warp, and each warp's partial O row.
inline constexpr int kCombineThreads = 128;
inline constexpr int kMaxSplits = 128;
inline constexpr int kCombineSharedBytes(int d_v) { return 4 * (kMaxSplits + 2 * (kCombineThreads / 32) + (kCombineThreads / 32) * d_v); }
// On sm_90 and newer the split kernel lets the combine grid start early and the combine waits on
// the device for the partials (ForwardPlan::dependent_launch), so the runtime may launch it with
// programmatic stream serialization: the one rule both sides read.
inline constexpr bool combine_waits_on_device(int sm) { return sm >= 90; }
// After these come the spec's params (i32 or f32, by slot) and its tensors (global pointers,
// by slot): see runtime/launch.cpp. Kernels with a block map (BlockMapPolicy::needed) take two
// more pointers last: the tile lists and their counts, written by the pre-pass kernel
// (templates/fwd/block_map.cpp) and read by the forward kernel.
//   counts[map][q_tile]                       number of key tiles to visit
//   tiles[map][q_tile][0 .. counts)           key-tile index, bit 31 set when no element is masked
// with map = (per batch ? b : 0) · (per head ? heads_q : 1) + (per head ? h : 0).
inline constexpr uint32_t kTileFullBit = 0x80000000u;
// Kernels that load with the TMA unit (ForwardPlan::tma, CompiledKernel::tensor_maps) take three
// more parameters after all of those: Q's, K's and V's tensor maps (cuTensorMapEncodeTiled's
// 128-byte CUtensorMap, 64-byte aligned, passed by value as CUTLASS passes them). Each describes its
// tensor as 4-d, innermost first (head dim, seq, heads, batch), strides from the launch, and its box
// is one 64-column panel of a tile (128 bytes a row, 128-byte swizzle): kTensorMapPanel × block_m
// rows for Q, × block_n for K and V. Rows past seq_q or seq_kv read as zeros. Kernels that also
// store O with it (ForwardPlan::tma_store) take a fourth, O's, its box one 64-column panel of a
// compute warp's rows (block_m / num_warps); rows past seq_q are not written.
enum ForwardTensorMap : int { kMapQ = 0, kMapK, kMapV, kMapCount };  // kMapCount: the loads' maps
inline constexpr int kMapO = kMapCount;                              // under ForwardPlan::tma_store
inline constexpr int kMapMost = kMapCount + 1;                       // the most a kernel takes
inline constexpr int kTensorMapBytes = 128;
inline constexpr int kTensorMapPanel = 64;

// Parameter indices, in the order the kernel declares them (pointers, then 12 strides, then scalars).
enum ForwardParam : int {
  kParamQ = 0, kParamK, kParamV, kParamO, kParamLse,
  kParamStrides,               // 12 × i64: q(b,s,h), k(b,s,h), v(b,s,h), o(b,s,h)
  kParamSeqQ = kParamStrides + 12,
  kParamSeqKv, kParamGroup, kParamScaleLog2, kParamRangeOk,
  kParamSplits, kParamPartialO, kParamPartialLse, kParamCuSeqlensQ, kParamCuSeqlensKv,
  kParamBlockTable, kParamPageSize, kParamPagesPerSeq, kParamSeqUsedKv, kParamGridHeads, kParamGridBatch,
  kParamTileCounter,
  kParamCount
};

// Fills `slots` (kParamCount pointers into `p`) as cuLaunchKernel's kernelParams wants them.
inline void forward_param_slots(ForwardParams& p, void* slots[kParamCount]) {
  slots[kParamQ] = &p.q;
  slots[kParamK] = &p.k;
  slots[kParamV] = &p.v;
  slots[kParamO] = &p.o;
  slots[kParamLse] = &p.lse;
  int64_t* strides[4] = {p.q_stride, p.k_stride, p.v_stride, p.o_stride};
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 3; ++i) slots[kParamStrides + 3 * t + i] = &strides[t][i];
  slots[kParamSeqQ] = &p.seq_q;
  slots[kParamSeqKv] = &p.seq_kv;
  slots[kParamGroup] = &p.group;
  slots[kParamScaleLog2] = &p.scale_log2;
  slots[kParamRangeOk] = &p.range_ok;
  slots[kParamSplits] = &p.num_splits;
  slots[kParamPartialO] = &p.partial_o;
  slots[kParamPartialLse] = &p.partial_lse;
  slots[kParamCuSeqlensQ] = &p.cu_seqlens_q;
  slots[kParamCuSeqlensKv] = &p.cu_seqlens_kv;
  slots[kParamBlockTable] = &p.block_table;
  slots[kParamPageSize] = &p.page_size;
  slots[kParamPagesPerSeq] = &p.pages_per_seq;
  slots[kParamSeqUsedKv] = &p.seqused_kv;
  slots[kParamGridHeads] = &p.grid_heads;
  slots[kParamGridBatch] = &p.grid_batch;
  slots[kParamTileCounter] = &p.tile_counter;
}

}  // namespace flashjit

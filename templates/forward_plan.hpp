// The instantiation of the forward template: spec + tile config → every number the code needs,
// with the limits checked first (a config that breaks one is rejected with the limit named).
#pragma once

#include <string>

#include "compiler/dsl/kv_range.hpp"
#include "compiler/dsl/spec.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit {

// Shared memory of one CTA, in bytes from the dynamic base. A tile of rows × d is stored as
// d_pad / 64 panels of rows × 64 elements (d_pad = round_up(d, 64)), 16-byte chunks
// XOR-swizzled by row % 8 inside each 128-byte row (templates/attention_fwd.cpp, SmemTile).
struct ForwardSmem {
  int q = 0;          // [block_m][d_qk_pad]
  int k = 0;          // num_stages × [block_n][d_qk_pad]
  int v = 0;          // num_stages × [block_n][d_v_pad]
  int k_stage = 0, v_stage = 0;
  int total = 0;
};

struct ForwardPlan {
  AttentionSpec spec;
  TileConfig config;
  std::string config_reason;
  std::string arch;
  dsl::Spec dsl;                  // the validated spec (params and tensors by slot)
  dsl::ExprPtr mask;              // desugared (shorthands expanded); null = every key visible
  dsl::ExprPtr score;             // desugared; null = identity
  dsl::KvRange kv_range;          // closed-form kv bounds of `mask` (when mask is set)
  // Masks the closed form does not describe exactly (tensor reads, non-affine terms) get a
  // block map: a generated pre-pass lists, per query tile, the key tiles with any visible
  // element and flags those with all elements visible (FlexAttention's kv_indices / full_kv).
  bool block_map = false;
  bool map_per_batch = false, map_per_head = false;  // does the mask depend on b / on h, h_kv?
  int threads = 0;
  int m_tiles = 1;                // 16-row mma tiles per warp: block_m / (16 · num_warps), 1 or 2
  int d_qk_pad = 0, d_v_pad = 0;  // shared-memory row widths (elements)
  int k_steps = 0;                // ceil(d_qk / 16): mma k-steps of S = QKᵀ
  bool q_in_registers = false;    // mma.sync: Q fragments loaded once (d_qk ≤ 128) or re-read per tile; wgmma: never
  // Warpgroup MMA (sm_90a): S and O by wgmma.mma_async instead of mma.sync. Needs one m-tile per
  // warp and whole warpgroups (num_warps 4 or 8); FLASHJIT_MMA=sync turns it off.
  bool wgmma = false;
  ForwardSmem smem;
  int shared_bytes = 0;
  // CTAs per SM ptxas must leave room for (.minnctapersm): as many as shared memory allows,
  // while the register budget that leaves (64K / (CTAs × threads)) still holds the kernel's
  // accumulators with room to spare. Without it, a rarely taken mask path (tensor reads) could
  // raise registers past the budget of its closed-form twin and cost a CTA per SM.
  int min_ctas_per_sm = 1;
  std::string entry;              // kernel symbol; the pre-pass is entry + "_blockmap"
  std::string describe() const;
};

// The heuristic table (DESIGN §6, FLASHJIT_AUTOTUNE=off), by head dim and by the tensor-core
// instruction `arch` gets (wgmma on sm_90a unless FLASHJIT_MMA=sync, else mma.sync).
TileConfig heuristic_config(const AttentionSpec& spec, const std::string& arch, std::string* reason);

// Shared-memory slack of a wgmma kernel: its base is rounded up to 1024 bytes.
inline constexpr int kWgmmaAlignSlack = 1024;

// Copies what the runtime needs to launch `plan` (entry points, block-map layout, threads,
// shared memory, description) into `out`: one place for a fresh compile and a cache hit alike.
void record_plan(const ForwardPlan& plan, CompiledKernel& out);

// The tensor-core instruction a config gets on `arch` ("wgmma" or "mma.sync"); part of every key.
std::string mma_kind(const TileConfig& config, const std::string& arch);

// Throws Error(spec) naming the violated limit when `config` cannot be built for `spec` on `arch`.
ForwardPlan plan_forward(const AttentionSpec& spec, const TileConfig& config, const std::string& reason,
                         const std::string& arch);

}  // namespace flashjit

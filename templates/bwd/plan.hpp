// The backward template's tile plan (FlashAttention-2, Dao 2023, Algorithm 2, split in two
// kernels): analysed spec + tile config + target → every number the three kernels need, with the
// limits checked first.
//
// The dK/dV kernel holds `rows` keys of K and V on chip and streams the query tiles that can see
// them (Q and dO, `cols` rows each); the dQ kernel holds `rows` queries of Q and dO and streams the
// key tiles they see (K and V). Each recomputes P = exp(S − LSE) itself, so no fp32 dQ
// accumulator crosses CTAs: no atomics, and every run gives bitwise the same dQ, dK and dV.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/analyzed_spec.hpp"
#include "compiler/kernel_template.hpp"

namespace flashjit {

// One main kernel of the backward. Shared memory, in bytes from the (aligned) base: the two
// resident tiles (K and V, or Q and dO), then `stages` × the two streamed tiles (Q and dO, or K
// and V); each tile in the layout of compiler/tile/smem_tile.hpp, d padded to 64.
struct BackwardPass {
  int rows = 0, cols = 0, warps = 0, stages = 0, threads = 0;
  // Warpgroups that each hold all `rows` with outputs of their own (BackwardPlan::warpgroup_split):
  // the products see warps / roles warps.
  int roles = 1;
  int m_tiles = 1;      // 16-row mma tiles per warp
  bool wgmma = false;
  int res_qk = 0, res_v = 0;          // resident tiles of width d_qk and d_v
  int str_qk = 0, str_v = 0;          // streamed regions
  int str_qk_stage = 0, str_v_stage = 0;
  int stats = 0, stats_stage = 0;     // per stage: LSE and D of the streamed queries (the dK/dV kernel)
  // The dK/dV kernel with dQ (BackwardPlan::fused_dq): dSᵀ of the tile (rows × cols, the dtype, the
  // layout above) and the tile's fp32 dQ, one kDqBlockFloats block per 64 queries × 64 columns in
  // the workspace's order (templates/common/backward_abi.hpp).
  int ds = 0, dq = 0;
  // dSᵀ buffers the steps alternate between: 2 with a producer where shared memory allows, so that
  // a step's dSᵀ never overwrites the one the other warpgroup's dQ product of the step before may
  // still read, with no barrier per step for it (one barrier per step publishes dSᵀ).
  int ds_buffers = 1;
  // BackwardPlan::warpgroup_split: P (times the score's derivative) of the tile in fp32, from the
  // warpgroup that computes it to the one that forms dS, rows × cols in each thread's order; two
  // buffers that the steps alternate between with a producer (its named barrier then orders each
  // buffer's reuse two steps on, where the CTA barrier that ends a step orders it without one).
  int p_share = 0;
  int p_buffers() const { return producer ? 2 : 1; }
  // dP = dO Vᵀ issued with S, before S's softmax, and waited for after it (FlashAttention-3 §3.2's
  // intra-warpgroup overlap, applied to the backward's two independent products): the tensor cores
  // work under the softmax, at the cost of dP's registers held across it.
  bool dp_early = false;
  // A producer warpgroup (FlashAttention-3 §3.1; the dK/dV kernel only, plan_backward says where):
  // its 128 threads issue the streamed tiles' copies into the stage ring and hand each stage over
  // through a pair of mbarriers at `barriers` (full, then empty, 8 bytes per stage each), so the
  // compute warpgroups meet no CTA barrier per step. `threads` counts them; the products and the
  // accumulators use compute_threads; setmaxnreg moves registers to the compute warpgroups.
  bool producer = false;
  int compute_threads = 0;
  int barriers = 0;
  int producer_registers = 0, compute_registers = 0;
  int accumulators = 0;  // fp32 registers per compute thread for the outputs, S and dP (estimated)
  int smem_align = 1;
  int shared_bytes = 0;
  int min_ctas_per_sm = 1;
};

struct BackwardPlan {
  AnalyzedSpecPtr spec;
  TileConfig config;
  Target target;
  // dK/dV: rows = block_n keys (num_warps warps), cols = block_m queries, num_stages stages.
  BackwardPass kv;
  // dQ: rows = 64 queries (4 warps: one warpgroup), or 128 on two warpgroups where one 64-query CTA
  // fills an SM's shared memory (plan_backward); cols = 64 keys (32 above d = 128).
  BackwardPass q;
  // dK and dV by two launches of the dK/dV kernel (one accumulator each) when both would not fit
  // the register file together: (d_qk + d_v) / 2 fp32 per thread and m-tile above 128.
  bool split_kv = false;
  // Instead of split_kv, one launch of 64 keys on two warpgroups (FlashAttention-3's backward gives
  // its warpgroups parts of one key tile's work the same way): the first computes S, P and
  // dV += Pᵀ dO, the second dP, dS and dK += dSᵀ Q, with P handed over through shared memory.
  // S is computed once per tile instead of twice. Configs {block_m, 64, 8, stages} on wgmma, where
  // split_kv would hold; only with Target::backward_warpgroups.
  bool warpgroup_split = false;
  // dQ accumulated by the dK/dV kernel (FlashAttention-3 §3.3): dQ_i += dS_ij K_j by wgmma, each
  // 64 × 64 block of the tile added into an fp32 workspace by one bulk reduction, then converted.
  // The order of those additions varies from run to run, so `deterministic` calls take the dQ
  // kernel instead.
  bool fused_dq = false;
  std::string fused_dq_note;  // why not, when fused_dq is false
  // Why the dK/dV kernel has no producer warpgroup (BackwardPass::producer), when it has none:
  // FLASHJIT_BWD_PRODUCER on, wgmma on 8 warps (keys of their own, or dK and dV by warpgroup), head
  // dims 64 or 128 or both 256, accumulators within 240 − 48 registers, ptxas (setmaxnreg), and
  // shared memory and registers for one CTA per SM only.
  std::string kv_producer_note;
  int d_qk_pad = 0, d_v_pad = 0;
  int k_steps_qk = 0, k_steps_v = 0;  // 16-wide k-steps of d_qk and of d_v

  const AttentionSpec& attention() const { return spec->spec; }
  std::string describe() const;
};

// setmaxnreg's registers for the dK/dV kernel's compute threads with a producer (FlashAttention-3's
// split: 384 × 168 = 256 × 240 + 128 × 24), and what they must leave beyond the accumulators.
inline constexpr int kBackwardComputeRegisters = 240;
inline constexpr int kProducerRegisterMargin = 48;

// Rows of D = rowsum(dO ∘ O) one pre-pass CTA computes (4 warps, 4 rows each).
inline constexpr int kPrepRows = 16;
inline constexpr int kPrepThreads = 128;

// Entry points of a backward module named `entry`, launched in this order: map_q and map_kv
// (masks with a block map), prep, dkdv, dv (when the plan splits), dq. With plan.fused_dq, dkdv
// also adds dQ into the workspace and dq_convert follows it instead of dq, unless the call is
// deterministic: then dkdv_det and dq run.
struct BackwardEntries {
  std::string dkdv;  // dK and dV; dK only when the plan splits them; and dQ when fused
  std::string dv;    // dV only (empty unless the plan splits)
  std::string dq;
  std::string prep;
  std::string map_q, map_kv;  // empty unless the mask has a block map
  std::string dkdv_det, dq_convert;  // empty unless plan.fused_dq
};

BackwardEntries backward_entries(const BackwardPlan& plan, const std::string& entry);

TileConfig backward_heuristic(const AnalyzedSpec& spec, const Target& target, std::string* reason);
// Query rows a dK/dV key tile of 128 walks on average at these sizes and params: seq_q without a
// mask, the mean of the mask's closed-form transposed range where it is exact; nothing for a mask
// with a block map, a range that may wrap, or a band that reads the batch or head.
std::optional<double> mean_query_walk(const AnalyzedSpec& spec, int64_t seq_q, int64_t seq_kv,
                                      const std::vector<ParamValue>& params);
// The backward's config for a shape and params when nothing is tuned (autotune off), and the centre
// of its quick tuning: the table's (backward_heuristic), except at d <= 64 on long walks
// (mean_query_walk), where the dK/dV kernel with a producer warpgroup that also adds dQ pays
// (docs/perf-notes.md §32).
TileConfig backward_heuristic_for(const AnalyzedSpecPtr& spec, const Target& target, const ProblemShape& shape,
                                  const std::vector<ParamValue>& params, std::string* reason);
std::optional<std::string> check_backward_shape(const TileConfig& config);
TileSpace backward_search_space(const AnalyzedSpec& spec);
// Throws Error(spec) naming the violated limit when `config` cannot be built.
BackwardPlan plan_backward(const AnalyzedSpecPtr& spec, const TileConfig& config, const Target& target);

}  // namespace flashjit

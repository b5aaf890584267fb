// The forward template's tile plan: analysed spec + tile config + target → every number the code
// needs, with the limits checked first (a config that breaks one is rejected with the limit named).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "compiler/analyzed_spec.hpp"
#include "compiler/kernel_template.hpp"
#include "templates/common/forward_abi.hpp"

namespace flashjit {

// Shared memory of one CTA, in bytes from the dynamic base. A tile of rows × d is stored as
// d_pad / 64 panels of rows × 64 elements (d_pad = round_up(d, 64)), 16-byte chunks
// XOR-swizzled by row % 8 inside each 128-byte row (compiler/tile/smem_tile.hpp).
struct ForwardSmem {
  int q = 0;          // [block_m][d_qk_pad]
  int q2 = 0;         // the second Q buffer (ForwardPlan::q_buffers 2), after the K/V stages
  int k = 0;          // num_stages × [block_n][d_qk_pad]
  int v = 0;          // num_stages × [block_n][d_v_pad]
  int k_stage = 0, v_stage = 0;
  // Producer warpgroup: num_stages "full" then num_stages "empty" mbarriers, 8 B each (with
  // ForwardPlan::kv_bars a second such set for the V tiles, the first then being K's); with
  // persistent CTAs then the tile hand-over's and the Q buffers' mbarriers (two "full" and two
  // "empty" each) and the claimed tile index, double-buffered (two i32).
  int barriers = 0;
  // From `barriers`: the persistent walk's mbarriers (after the stages') and its tile index.
  int walk_bars = 0, tile_slots = 0;
  int q_bytes = 0;  // one Q buffer
  // ForwardPlan::staged_store: [block_m][d_v], each warp's rows its own (stage_in_q: q; stage_in_v: v).
  int o_stage = 0;
  int total = 0;
};

struct ForwardPlan {
  AnalyzedSpecPtr spec;
  TileConfig config;
  Target target;
  int threads = 0;
  int m_tiles = 1;                // 16-row mma tiles per warp: block_m / (16 · num_warps), 1 or 2
  int d_qk_pad = 0, d_v_pad = 0;  // shared-memory row widths (elements)
  int k_steps = 0;                // ceil(d_qk / 16): mma k-steps of S = QKᵀ
  bool q_in_registers = false;    // mma.sync: Q fragments loaded once (d_qk ≤ 128) or re-read per tile; wgmma: never
  // Warpgroup MMA (sm_90a): S and O by wgmma.mma_async instead of mma.sync. Needs one m-tile per
  // warp and whole warpgroups (num_warps 4 or 8), and Target::allow_wgmma.
  bool wgmma = false;
  // Producer warpgroup (FlashAttention-3 §3.1, warp specialisation): a third warpgroup after the
  // two compute warpgroups issues every K/V cp.async into the stage ring and signals each stage's
  // "full" mbarrier; the compute warps wait on it and free the stage on its "empty" mbarrier, with
  // no CTA-wide barrier per key tile. setmaxnreg moves registers to the compute warpgroups. Where
  // it applies: producer_blocker().
  bool producer = false;
  int compute_threads = 0;        // 32 · num_warps; `threads` adds the producer's 128
  // The CTA at grid x serves query tile q_tiles − 1 − x. The hardware starts CTAs in grid order,
  // so with a mask whose key range grows with the row (causal) the longest tiles start first and
  // the last wave holds the shortest, not the longest (FlashAttention-2's causal schedule; +3–5% at
  // 4k–16k causal on the H200, docs/perf-notes.md §14). Masked, unsplit, not varlen launches.
  bool last_tile_first = false;
  // With last_tile_first, the order runs across a group of heads, not head by head (ordered_tile,
  // templates/fwd/tile_order.hpp), where the key range grows with the row: one closed-form band
  // with no lower bound (causal). On the H100 causal gained up to 3.5%, while windows and even
  // documents, whose tiles walk alike, lost up to 2.5% and 3.9% (§58). Measured on wgmma at
  // d ≤ 128 only: d = 256 and mma.sync keep the head-by-head order. Packed GQA launches reverse x
  // alone.
  bool tiles_across_heads = false;
  // Persistent CTAs (FlashAttention-3 §3.1's dynamic tile scheduler): a CTA serves the tile of its
  // linear index, then takes the next from a global counter (grid size + an atomic add) until none
  // is left. Tile t is query tile t % q_tiles (from the last, with last_tile_first) of head (t /
  // q_tiles) % heads, batch t / (q_tiles · heads), or with tiles_across_heads ordered_tile's order
  // over heads × batches — the order a full grid starts them in, and as there a tile starts when an
  // SM is free: the tiles running at once stay a window of neighbours, which share their head's K/V
  // in L2, and long and short tiles spread over the SMs (a static stride gave one CTA the long
  // causal tiles and another the short: §23 of docs/perf-notes.md). The producer warpgroup claims
  // the next index once this tile's copies are issued and hands it to every warp through a shared
  // slot and mbarriers; the producer then runs on into the next tile's K/V (and Q, q_buffers) while
  // the compute warps finish this one and store its O. Producer plans only (one CTA per SM by
  // shared memory); the runtime picks the grid (FLASHJIT_PERSISTENT).
  bool persistent = false;
  // Persistent: Q buffers. With two (tile u of a CTA's walk in buffer u % 2), the producer loads
  // each tile's Q and issues its first K/V copies while the compute warps finish the tile before,
  // so no load latency is left at the tile boundary. One where shared memory has no room for a
  // second (d = 256): the producer loads the next tile's Q once the tile's last S frees it
  // (stage_in_v), or the compute warps load it after their last product of this one (stage_in_q).
  int q_buffers = 1;
  // Persistent, head dims ≤ 128: the rotated walk. Step j issues O += P_{j−1} V_{j−1} and
  // S_j = Q K_jᵀ back to back and waits once for both, instead of waiting for each product
  // (FlashAttention-3 §3.2 pairs the same two products in a step). Measured +1–5% at d = 128 in
  // the bench and up to 10% slower at d = 256, for a reason not established (docs/perf-notes.md
  // §34).
  bool rotated = false;
  // Target::quick took the rotated walk from this plan: each step waits for S before P·V, the
  // same results bit for bit, compiled faster (a tiered compile's first kernel, runtime/upgrade.hpp).
  bool quick = false;
  // Producer plans: K and V tiles each get a full and an empty mbarrier per stage, so a K tile is
  // refilled once the S product that read it is done, while P·V still reads V. The rotated walk
  // needs it (its P·V runs a step behind S); so does a single stage (d = 256 with 128-key tiles),
  // where one pair would leave each step waiting for a whole load: 20–30% slower (docs/perf-notes.md
  // §37). Elsewhere one pair per stage: the 64-key d = 256 walk measured 1–5% slower with two.
  bool kv_bars = false;
  // The online softmax's lazy rescale (tile::online_softmax's grow_at, in the exp2 domain; 0: off):
  // a row keeps its max until a tile raises it by more than 2^grow_at, and a warp rescales O only
  // when one of its rows moved its max (FlashAttention-4's conditional rescaling). l and O share
  // the stale max, so the result is exact; P stays below 2^grow_at. Set in producer plans whose S
  // and O take 192 or more registers per thread (d = 256 with 128-key tiles): O's 128 multiplies,
  // in a branch, no longer interleave with the softmax, and ptxas fits the walk (300 B of spills
  // without it at 232 registers). Alone, at every head dim, it measured flat on the H200 (docs/
  // perf-notes.md §37); at the H100's power limit it gains on the unmasked walks of d = 64's 96-key
  // and d = 128's 176-key tiles, where plan_forward sets it too (§55).
  float grow_at = 0.f;
  // Persistent with two Q buffers (d_v 64 or 128), or with one at d_v = 256 (stage_in_v or
  // stage_in_q), and the CTA-wide TMA walk at d_v = 64 (stage_in_q, tma_store): O goes out through
  // shared memory, each warp staging its own rows, then as 16-byte vectors, a row's lanes on
  // consecutive chunks, or by TMA store (tma_store), instead of 4-byte pairs spread over eight rows.
  bool staged_store = false;
  // With one Q buffer (d_v = 256) where stage_in_v does not apply (two stages, or no TMA), O is
  // staged in it: once every compute warp is past its last product of the tile, Q is no longer
  // read; the warps stage and store O there, wait for each other, then load the next tile's Q.
  // The CTA-wide TMA walk at d_v = 64 stages O in its Q buffer too, after a CTA barrier that has
  // every warp past its last product (one tile per CTA: no reload follows).
  bool stage_in_q = false;
  // d_v = 256 on one stage with TMA loads: O is staged in the V stage of the tile's last step, once
  // every compute warp's last P·V is done, and each warp frees that stage when it has read its rows
  // out. Q is then dead after the tile's last S: each warp frees the one Q buffer there, and the
  // producer loads the next tile's Q under this tile's last softmax, P·V and epilogue, where with
  // O staged in Q the compute warps loaded it after the epilogue and waited for it (5% of the stall
  // samples at 1k causal, docs/perf-notes.md §48). A tile with no key tile stages O in Q instead.
  bool stage_in_v = false;
  // With stage_in_v or rotated (two warpgroups): the two compute warpgroups take turns at issuing
  // their products (FlashAttention-3's ping-pong, Shah et al. 2024 §3.1), so that one's softmax
  // runs under the other's products instead of both taking their exponentials at once: +4.4–6.3%
  // at d = 256, 1k and 4k (docs/perf-notes.md §49). In the rotated walk, which already overlaps
  // its products, turns alone measured flat (§34, §49); with d_v = 128's P·V as one instruction
  // per 16 keys (MmaShape::whole_pv) +0.1–2.4% on the masks, flat on the standard shapes (§51).
  bool pingpong = false;
  // With staged_store and tma (the CTA-wide walk at d_v = 64): each compute warp stages its rows of
  // O in the 64-column panels the TMA's 128-byte swizzle reads, and its first lane stores them with
  // one TMA store per panel (FlashAttention-3's epilogue); rows past seq_q are clipped by the
  // tensor map. O's map is the kernel's fourth (forward_abi.hpp, kMapO).
  bool tma_store = false;
  // The tensor maps the kernel takes last (forward_abi.hpp): Q's, K's and V's under tma, then O's
  // under tma_store.
  int tensor_maps() const { return tma ? kMapCount + (tma_store ? 1 : 0) : 0; }
  // Producer plans under Target::tma: the producer's first thread loads each K and V stage (and,
  // with two Q buffers, each Q tile) with the TMA unit, one cp.async.bulk.tensor per 64-column
  // panel, straight into the panels' 128-byte swizzle (the tensor map's SWIZZLE_128B is the XOR
  // the panels use), its bytes counted on the stage's full mbarrier (expect_tx) — FlashAttention-3's
  // loads (Shah et al. 2024, §3.1). The producer's other warps exit after setmaxnreg; the compute
  // warps need no proxy fence per stage, since the TMA writes through the async proxy that wgmma
  // reads. The kernel takes Q, K and V tensor maps as its last parameters (forward_abi.hpp).
  // Without a producer, in the forms plan.cpp's cta_loads_by_tma() allows: the CTA's first thread loads Q and
  // the stages, and refills a stage once every warp has arrived at its "empty" mbarrier.
  bool tma = false;
  // The CTA-wide walk under tma on two warpgroups (128 rows, 8 warps) with a mask the closed form
  // bounds (no block map): each warpgroup finds the key range of its own 64 rows, computes only the
  // tiles inside it and tests its own full range, so a 128-row tile computes no more of a diagonal
  // than two 64-row tiles would, while each K/V tile is still loaded once for both. d = 64 causal on
  // 96-key tiles: +2.2% at 4k, +1.5% at 16k on the H100 (docs/perf-notes.md §63).
  bool wg_key_ranges = false;
  // Split-KV on sm_90+: the combine grid is launched with programmatic stream serialization
  // (FlashAttention-3 does the same), the split kernel lets it start at once and the combine
  // waits for the partials (tile::launch_dependents / wait_prerequisites), so its launch and
  // prologue overlap the split kernel's last CTAs instead of following them.
  bool dependent_launch = false;
  // setmaxnreg's counts with a producer: the warpgroups' registers move within what the launch
  // allocated (65536 / threads, in multiples of 8: 168 at 384 threads), so
  // 128 · producer_registers + compute_threads · compute_registers ≤ threads · 168. A larger ask
  // blocks setmaxnreg.inc forever (PTX ISA §9.7.17.1): the CTA deadlocks.
  int producer_registers = 0, compute_registers = 0;
  ForwardSmem smem;
  int smem_align = 1;             // the kernel rounds its shared base up to this (wgmma: 1024)
  int shared_bytes = 0;
  // CTAs per SM ptxas must leave room for (.minnctapersm): as many as shared memory allows,
  // while the register budget that leaves (64K / (CTAs × threads)) still holds the kernel's
  // accumulators with room to spare. Without it, a rarely taken mask path (tensor reads) could
  // raise registers past the budget of its closed-form twin and cost a CTA per SM.
  int min_ctas_per_sm = 1;

  const AttentionSpec& attention() const { return spec->spec; }
  bool has_map() const { return spec->block_map.needed; }
  std::string describe() const;
};

// Shared-memory slack of a wgmma kernel: its base is rounded up to 1024 bytes.
inline constexpr int kWgmmaAlignSlack = 1024;

// The tensor-core instruction a config gets: "wgmma" (sm_90a, whole warpgroups, allowed) or "mma.sync".
std::string forward_mma_kind(const TileConfig& config, const Target& target);

// The heuristic table (FLASHJIT_AUTOTUNE=off), by head dim and by the instruction the target gets.
TileConfig forward_heuristic(const AnalyzedSpec& spec, const Target& target, std::string* reason);

// The heuristic's config for a launch's shape where the table's row does not serve it, or nothing:
// decode (`rows`, seq_q × the GQA group: the query rows one K/V head serves, at most 64), masked
// walks over at most 1024 `keys` (seq_kv) on d = 64's 96-key tiles, and unmasked walks over more
// than 8192 at d = 128. FLASHJIT_AUTOTUNE=off runs it; tuning times it first and searches around it.
std::optional<TileConfig> forward_shape_heuristic(const AnalyzedSpec& spec, const Target& target, int64_t rows,
                                                  int64_t keys, std::string* reason);

// forward_shape_heuristic's `rows` for a launch: seq_q × the GQA group (heads_q / heads_kv). The
// dispatch and the tuner's centre both ask it, so autotune off and a tuning agree on the row.
inline int64_t query_rows_per_kv_head(int64_t seq_q, int64_t heads_q, int64_t heads_kv) {
  return seq_q * (heads_kv > 0 ? heads_q / heads_kv : 1);
}

// Why this spec's forward cannot pack a GQA group's query heads into one CTA, or nothing: packed
// rows hold several query heads, so neither the mask nor the score may read the query head `h`,
// and the block map (masks that read tensors) lists key tiles per one head's query tile.
std::optional<std::string> gqa_packing_blocker(const AnalyzedSpec& spec);

// Why this spec's forward cannot run over packed sequences (varlen), or nothing: a spec tensor
// sized by seq_q or seq_kv has no single size, and the block map is laid out per padded batch.
std::optional<std::string> varlen_blocker(const AnalyzedSpec& spec);

// The template's structural rule: why `config` is not a tile shape it builds, or nothing.
std::optional<std::string> check_forward_shape(const TileConfig& config);

// 96-key tiles: only d = 64's whole-sequence CTA-wide kernel of 128 rows on two warpgroups builds
// them (plan_forward refuses them elsewhere); every other launch form takes its own tile.
inline bool shared_key_tiles(const TileConfig& config) { return config.block_n == 96; }

// 176-key tiles: only d = 128's whole-sequence producer kernel builds them (plan_forward), which
// the long-walk row gives unmasked walks over more than 8192 keys (forward_shape_heuristic).
inline bool wide_key_tiles(const TileConfig& config) { return config.block_n == 176; }

// Tiles that only the whole-sequence form builds: every serving form takes its own.
inline bool whole_sequence_tile(const TileConfig& config) { return shared_key_tiles(config) || wide_key_tiles(config); }

// The autotuner's values per tile parameter: defaults by head dim, narrowed by the spec's `tune`.
TileSpace forward_search_space(const AnalyzedSpec& spec);

// Why a plan's forward has no producer warpgroup, or nothing (`plan` complete but for it).
std::optional<std::string> producer_blocker(const ForwardPlan& plan);

// Throws Error(spec) naming the violated limit when `config` cannot be built.
ForwardPlan plan_forward(const AnalyzedSpecPtr& spec, const TileConfig& config, const Target& target);

}  // namespace flashjit

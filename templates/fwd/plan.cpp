#include "templates/fwd/plan.hpp"

#include <algorithm>
#include <optional>
#include <sstream>

#include "compiler/dsl/affine.hpp"
#include "compiler/dsl/ast.hpp"
#include "templates/common/arch_limits.hpp"
#include "templates/common/forward_abi.hpp"

namespace flashjit {

namespace {

// Registers per thread: the fp32 S and O accumulators, Q when it stays in registers (two bf16 or
// fp16 per register), and the overhead measured for the instruction family.
int register_estimate(const TileConfig& c, int d_qk, int d_v, bool q_in_registers, bool wgmma) {
  const int threads = c.num_warps * 32;
  const int accumulators = (c.block_m * c.block_n + c.block_m * d_v + (q_in_registers ? c.block_m * d_qk / 2 : 0)) / threads;
  return accumulators + (wgmma ? kRegisterOverheadWgmma : kRegisterOverheadMmaSync);
}

// S and O accumulators of 192 or more fp32 per compute thread: what needs the lazy rescale and
// 240 registers to assemble without spills (ForwardPlan::grow_at).
bool wide_accumulators(const ForwardPlan& p) {
  return (p.config.block_m * p.config.block_n + p.config.block_m * p.attention().head_dim_v) / p.compute_threads >= 192;
}

// Registers per thread the 96-key tiles (shared_key_tiles) need: two CTAs per SM, each sharing
// its K/V tiles between 128 rows where the 64-row kernel's three loaded them per 64. ptxas 13.0
// assembles them without spills in 128 (80 accumulators; the masked ones without O's staged
// store), fewer than the estimate's 56-register overhead asks for.
constexpr int kSharedKeyTileRegisters = 128;

int min_ctas_per_sm(const ForwardPlan& p) {
  const AttentionSpec& s = p.attention();
  const int need = shared_key_tiles(p.config)
                       ? kSharedKeyTileRegisters
                       : register_estimate(p.config, s.head_dim_qk, s.head_dim_v, p.q_in_registers, p.wgmma);
  return ctas_per_sm(p.target.arch, p.shared_bytes, p.threads, need);
}

// The d > 128 row of the mma.sync table keeps 64-key tiles while the estimate is at most this.
// ptxas 13.0 (sm_80, causal with a softcap score, the heaviest of the codegen matrix) spilled at
// estimates of 220 and above ({qk, v} = {136, 208}: 40 B; {64, 240}: 244 B; {136, 248}: 312 B)
// and never at 216 or below; 32-key tiles halve S and measured spill-free up to {128, 256} (253
// registers). tests/test_heuristic_spills.cpp checks a sample of the head-dim grid with ptxas,
// scripts/heuristic_spill_grid.sh the whole grid.
constexpr int kMmaSyncWideBudget = 216;

constexpr const char* kBlockN96 =
    "block_n 96 is built for one kernel only: d = 64 on 128 rows and 8 warps, wgmma with TMA loads (sm_90a), the "
    "whole-sequence forward (not split-KV, varlen, paged K/V or GQA packing); block_n 64 or 128 serve the others";

constexpr const char* kBlockN176 =
    "block_n 176 is built for one kernel only: d = 128 (query/key and value) on the producer warpgroup with TMA "
    "loads, 128 rows and 8 warps, assembled by ptxas (setmaxnreg gives its S and O accumulators their registers; "
    "sm_90a, the whole-sequence forward); block_n 64 or 128 serve the others";

[[noreturn]] void reject(const TileConfig& c, const std::string& why) {
  throw Error(ErrorKind::spec, "tile config " + c.str() + " cannot be built: " + why);
}

// Q, then num_stages K and V tiles: each stage holds one key tile of K and one of V.
ForwardSmem layout_smem(const TileConfig& c, int d_qk_pad, int d_v_pad) {
  ForwardSmem m;
  m.k_stage = c.block_n * d_qk_pad * 2;
  m.v_stage = c.block_n * d_v_pad * 2;
  m.q = 0;
  m.q_bytes = c.block_m * d_qk_pad * 2;
  m.k = m.q_bytes;
  m.v = m.k + c.num_stages * m.k_stage;
  m.total = m.v + c.num_stages * m.v_stage;
  return m;
}

// The compute warpgroups get 232 registers (measured, docs/perf-notes.md §13), the producer what
// the launch's allocation leaves: 384 × 168 − 256 × 232 = 128 × 40. Where S and O take 192 per
// thread (d = 256 with 128-key tiles) they get FlashAttention-3's 240, leaving the producer 24,
// which its one TMA thread needs; elsewhere 240 measured the same as 232 (§37).
void split_registers(ForwardPlan& p) {
  p.compute_registers = wide_accumulators(p) && p.tma ? 240 : 232;
  p.producer_registers = producer_registers(p.compute_threads, p.compute_registers);
  if (!p.producer_registers)
    throw Error(ErrorKind::internal, "internal error: " + std::to_string(p.threads) +
                                         " threads leave the producer fewer registers than setmaxnreg's 24");
}

// A region of `bytes` after the plan's shared memory so far; returns its offset.
int append_shared(ForwardPlan& p, int bytes) {
  const int at = p.smem.total;
  p.smem.total += bytes;
  p.shared_bytes += bytes;
  return at;
}

// The serving forms (split-KV, varlen, paged K/V, GQA packing): their own addressing, so neither
// the producer warpgroup nor the tensor maps serve them.
bool serving_form(const Target& t) { return t.split_kv || t.varlen || t.paged || t.pack_gqa > 1; }

// The CTA-wide wgmma walk under Target::tma: its first thread loads Q and the K/V stages by tensor
// map, and every warp waits on the stage's mbarrier, instead of every thread issuing cp.async and
// the CTA meeting at two barriers per key tile. In the d = 64 kernel (one warpgroup, three CTAs
// per SM) the copies kept the LSU pipe 12.5% busy (cuDNN's TMA-fed kernel: 1.7%), and its warps
// stalled on the memory pipe's queue and at the CTA barriers where cuDNN's did not (Nsight
// Compute); with TMA it runs 6.4% faster (docs/perf-notes.md §38). The forms the producer's tensor
// maps cover: whole 64-column panels, one query head per CTA, the launch's own batch and head
// layout.
bool cta_loads_by_tma(const ForwardPlan& p) {
  const AttentionSpec& s = p.attention();
  const Target& t = p.target;
  const bool whole_panels = s.head_dim_qk % 64 == 0 && s.head_dim_v % 64 == 0;
  return p.wgmma && t.tma && whole_panels && !serving_form(t);
}

// The most keys one query row can see when the mask bounds them by a constant: a sliding window
// (kv in [q - l, q + r]) gives l + r + 1. nullopt where a row's keys are unbounded or their count
// depends on a param, a size or the row, or the mask has more than one band.
std::optional<int64_t> keys_per_row(const AnalyzedSpec& spec) {
  if (!spec.mask || spec.kv_range.visit.size() != 1) return std::nullopt;
  const dsl::KvBand& band = spec.kv_range.visit.front();
  std::optional<int64_t> keys;
  for (const dsl::LinearForm& lo : band.lower)
    for (const dsl::LinearForm& hi : band.upper)
      if (const std::optional<dsl::LinearForm> width = dsl::difference(hi, lo); width && width->coeff.empty())
        keys = std::min(keys.value_or(INT64_MAX), width->c + 1);
  return keys;
}

// One closed-form band with no lower bound and every upper bound rising with q (causal, and
// causal with a score modifier): a row's key count grows with the row. Block-map masks never
// qualify: their tiles' lengths are data.
bool key_range_grows_with_row(const AnalyzedSpec& spec) {
  if (!spec.mask || spec.block_map.needed || spec.kv_range.visit.size() != 1) return false;
  const dsl::KvBand& band = spec.kv_range.visit.front();
  if (!band.lower.empty() || band.upper.empty()) return false;
  return std::all_of(band.upper.begin(), band.upper.end(),
                     [](const dsl::LinearForm& hi) { return hi.coeff_of(dsl::Sym::Q) > 0; });
}

}  // namespace

std::string forward_mma_kind(const TileConfig& c, const Target& target) {
  const bool whole_warpgroups = (c.num_warps == 4 || c.num_warps == 8) && c.block_m == 16 * c.num_warps;
  return target.arch == "sm_90a" && whole_warpgroups && target.allow_wgmma ? "wgmma" : "mma.sync";
}

TileConfig forward_heuristic(const AnalyzedSpec& spec, const Target& target, std::string* reason) {
  const int d = std::max(spec.spec.head_dim_qk, spec.spec.head_dim_v);
  TileConfig c;  // {block_m, block_n, num_warps, num_stages}
  // wgmma (sm_90a), measured on the H200 (docs/perf-notes.md §5, bf16, 4k, batch 4, hidden 2048):
  // one warpgroup with 128-key tiles at d ≤ 64; two warpgroups (8 warps, 128 rows) at larger d,
  // with 128-key tiles up to d = 128 and 64-key tiles above (192 KB of shared memory at d = 256).
  // mma.sync (sm_80, FLASHJIT_MMA=sync; §2 and §4): two m-tiles per warp at d ≤ 64 (each K/V
  // fragment feeds 4 mma); at d = 128 one m-tile and 64-key tiles (two m-tiles are 8% faster but
  // spill, so only the tuner picks them); above, 64-key tiles and one stage (2 CTAs per SM), or
  // 32-key tiles where the O accumulators are too wide for 64 (kMmaSyncWideBudget).
  if (d <= 64) c = {64, 128, 4, 2};
  else if (d <= 128) c = {128, 128, 8, 2};
  else c = {128, 64, 8, 2};
  const bool wgmma = forward_mma_kind(c, target) == "wgmma";
  // d = 256 where the TMA producer runs: 128-key tiles in one stage, cuDNN's tile (its SASS:
  // 64x128x16 products for S), +9–12% over 64-key tiles in two stages without a mask
  // (docs/perf-notes.md §37), +4–10% causal (§42). Not with a block map (a tensor-reading mask:
  // the document mask spills there) or a score modifier (not measured).
  const AttentionSpec& a = spec.spec;
  const bool producer_form = !serving_form(target);
  if (wgmma && a.head_dim_qk == 256 && a.head_dim_v == 256 && !spec.block_map.needed && !spec.score && target.tma &&
      target.moves_registers && producer_form)
    c = {128, 128, 8, 1};
  // d <= 64 with a window of at most 1024 keys per row: 64-key tiles. A query tile's short walk
  // starts and ends in partly masked key tiles, and 64-key tiles halve that masked work; measured
  // +5% at 1024 keys and +17-20% at 256, but 2-5% slower at 4096 (docs/perf-notes.md §43).
  std::string window_note;
  const std::optional<int64_t> keys = wgmma && d <= 64 ? keys_per_row(spec) : std::nullopt;
  if (keys && *keys <= 1024) {
    c.block_n = 64;
    window_note = " (64-key tiles: a window of " + std::to_string(*keys) + " keys per row)";
  }
  // d = 64 with TMA loads, elsewhere: 128 rows on two warpgroups and 96-key tiles, two CTAs per SM
  // (min_ctas_per_sm). The card runs at its power limit here, and each SM then reads a K/V tile once
  // per 128 query rows instead of once per 64: half the L2-to-SM traffic, a higher clock at the same
  // power. Measured on the H200 and the H100 against 64 × 128 tiles (docs/perf-notes.md §52): +5–6%
  // at 16k, +2–5% at 4k, +1% at 1k unmasked, −3–4% at 1k causal. 128-key tiles need more than the
  // 128 registers two such CTAs leave each thread. Not with a block map: the document masks ran
  // 7–17% slower at 4k (their 512-key documents straddle 96-key tiles); nor with a score modifier
  // (not measured).
  else if (wgmma && a.head_dim_qk == 64 && a.head_dim_v == 64 && target.tma && producer_form &&
           !spec.block_map.needed && !spec.score)
    c = {128, 96, 8, 2};
  if (!wgmma) {
    const int d_qk = spec.spec.head_dim_qk, d_v = spec.spec.head_dim_v;
    if (d <= 64) c = {128, 64, 4, 2};
    else if (d <= 128) c = {64, 64, 4, 2};
    else c = {64, 64, 4, 1};
    // Wide O accumulators (d_v up to 256) leave no room for 64-key S tiles: 32-key tiles instead.
    if (d > 128 && register_estimate(c, d_qk, d_v, d_qk <= 128, false) > kMmaSyncWideBudget) c = {64, 32, 4, 1};
  }
  if (reason)
    *reason = "heuristic table for d=" + std::to_string(d) + (wgmma ? ", wgmma" : ", mma.sync") + ": " + c.str() +
              window_note;
  return c;
}

std::optional<TileConfig> forward_shape_heuristic(const AnalyzedSpec& spec, const Target& target, int64_t rows,
                                                  int64_t keys, std::string* reason) {
  const int d = std::max(spec.spec.head_dim_qk, spec.spec.head_dim_v);
  const TileConfig table = forward_heuristic(spec, target, nullptr);
  if (forward_mma_kind(table, target) != "wgmma") return std::nullopt;
  // Decode: a head's query rows (with its GQA group's, packed together) fill at most one 64-row
  // tile, so the table's two warpgroups of 128 rows (d ≤ 128) compute mostly padding and give each
  // SM half the CTAs. One warpgroup of 64 rows with the table's key tiles is what quick tuning
  // picked at all six decode shapes of docs/perf-notes.md §17 (d = 128); measured on wgmma only.
  // d = 64's 96-key tile serves 128 rows sharing its K/V loads (§52): decode keeps the 64-row tile
  // with 128-key tiles that the table had before it.
  const TileConfig old64{64, shared_key_tiles(table) ? 128 : table.block_n, 4, table.num_stages};
  if (rows <= 64 && d <= 128 && table.block_m != 64) {
    if (reason)
      *reason =
          "decode heuristic for d=" + std::to_string(d) + ", wgmma, at most 64 query rows per K/V head: " + old64.str();
    return old64;
  }
  // A masked walk over at most 1024 keys on the table's 96-key tiles: the key tiles that cross the
  // diagonal are a larger share of a short walk, with few tiles to share K/V loads over. 64 × 64
  // tiles compute 6% more scores than the mask keeps at 1k causal: the full autotune's pick there
  // (docs/perf-notes.md §60), as 64-key tiles already serve short windows (§43). Since each
  // warpgroup of the 128-row tile walks only its own rows' keys (§63), the 96-key tile wastes a
  // 64-row tile's diagonal, not a 128-row one's: in 2-s windows beside cuDNN it is 0.6–1.1% slower
  // at 1k causal and 0.8% faster at 1.25k, 2.0–2.4% at 1.5k (§64). Unmasked walks of 1k keep 96
  // keys (+1%).
  constexpr int64_t kShortWalkKeys = 1024;
  if (shared_key_tiles(table) && spec.mask && keys <= kShortWalkKeys) {
    const TileConfig short64{64, 64, 4, table.num_stages};
    if (reason)
      *reason = "short-walk heuristic for d=" + std::to_string(d) + ", wgmma, a masked walk over at most " +
                std::to_string(kShortWalkKeys) + " keys: " + short64.str();
    return short64;
  }
  // An unmasked walk over more than 8192 keys at d = 128: 176-key tiles, FlashAttention-3's tile for
  // unmasked d = 128 (Shah et al. 2024; its hopper/tile_size.h). Each key tile's fixed work (the
  // row max's shuffles, O's rescale, the products' issue and waits, the stage's mbarriers) spreads
  // over 176 keys instead of 128, and on these cards the forward runs at its power limit, where
  // the energy saved is speed. Shared memory then holds one Q buffer and no staging buffer for O.
  // Measured against 128 × 128 on the H100, 3-s runs (docs/perf-notes.md §54): +1.9–4.5% at 16k,
  // +0.6% at 8k, −3% at 4k, −5.5% at 2k; partial last tiles and the lost Q-ahead and staged store
  // cost the shorter walks. Masked walks and score modifiers were not measured.
  if (spec.spec.head_dim_qk == 128 && spec.spec.head_dim_v == 128 && table.block_n == 128 && table.num_warps == 8 &&
      !spec.mask && !spec.score && target.tma && target.moves_registers && !serving_form(target) && keys > 8192) {
    const TileConfig wide{128, 176, 8, 2};
    if (reason)
      *reason = "long-walk heuristic for d=128, wgmma, an unmasked walk over more than 8192 keys: " + wide.str();
    return wide;
  }
  return std::nullopt;
}

std::optional<std::string> check_forward_shape(const TileConfig& c) {
  if (c.num_warps != 1 && c.num_warps != 2 && c.num_warps != 4 && c.num_warps != 8)
    return "num_warps must be 1, 2, 4 or 8 (a CTA of at most 256 threads)";
  if (c.block_m != 16 * c.num_warps && c.block_m != 32 * c.num_warps)
    return "block_m must be 16 or 32 × num_warps: each warp owns one or two 16-row mma tiles of queries";
  if (c.block_n != 32 && c.block_n != 64 && c.block_n != 96 && c.block_n != 128 && c.block_n != 176)
    return "block_n must be 32, 64, 96, 128 or 176 (pairs of 8-key mma tiles; 128 holds 64 scores per thread)";
  if (c.num_stages < 1 || c.num_stages > 4)
    return "num_stages must be 1 to 4 (K/V tiles in flight through the cp.async pipeline)";
  return std::nullopt;
}

TileSpace forward_search_space(const AnalyzedSpec& spec) {
  // block_m 64 = 4 warps × 1 m-tile, 128 = 4 × 2 or 8 × 1, 256 = 8 × 2 (check_forward_shape
  // couples them); stages: K/V tiles in flight, bounded by shared memory (Q + stages × (K + V)).
  // Larger heads get fewer and narrower key tiles: their K/V tiles fill shared memory.
  const int d = std::max(spec.spec.head_dim_qk, spec.spec.head_dim_v);
  TileSpace s;
  if (d <= 64) s = {{64, 128, 256}, {32, 64, 128}, {4, 8}, {1, 2, 3, 4}};
  else if (d <= 128) s = {{64, 128}, {32, 64, 128}, {4, 8}, {1, 2, 3}};
  else s = {{64, 128}, {32, 64}, {4, 8}, {1, 2}};
  const TuneSpace& t = spec.spec.tune;
  if (!t.block_m.empty()) s.block_m = t.block_m;
  if (!t.block_n.empty()) s.block_n = t.block_n;
  if (!t.num_warps.empty()) s.num_warps = t.num_warps;
  if (!t.num_stages.empty()) s.num_stages = t.num_stages;
  // The spec narrowed block_m or num_warps only: the other follows (block_m = 16 or 32 × num_warps).
  auto add = [](std::vector<int>& v, int x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  if (!t.block_m.empty() && t.num_warps.empty()) {
    s.num_warps.clear();
    for (int bm : s.block_m)
      for (int w : {bm / 16, bm / 32})
        if (w == 1 || w == 2 || w == 4 || w == 8) add(s.num_warps, w);
  } else if (t.block_m.empty() && !t.num_warps.empty()) {
    s.block_m.clear();
    for (int w : s.num_warps) add(s.block_m, 16 * w), add(s.block_m, 32 * w);
  }
  return s;
}

std::optional<std::string> gqa_packing_blocker(const AnalyzedSpec& spec) {
  for (const dsl::ExprPtr& e : {spec.mask, spec.score})
    if (e && dsl::mentions(*e, dsl::Builtin::H))
      return std::string("the ") + (e == spec.mask ? "mask" : "score") + " reads the query head h";
  if (spec.block_map.needed) return std::string("the mask needs a block map (it reads tensors)");
  return std::nullopt;
}

std::optional<std::string> varlen_blocker(const AnalyzedSpec& spec) {
  for (const dsl::TensorDecl& t : spec.dsl.tensors)
    for (const dsl::Extent& d : t.dims)
      if (d.kind == dsl::Extent::Kind::SeqQ || d.kind == dsl::Extent::Kind::SeqKv)
        return "tensor '" + t.name + "' has a seq_q or seq_kv extent, which differs per packed sequence";
  if (spec.block_map.needed) return std::string("the mask needs a block map (it reads tensors)");
  return std::nullopt;
}

ForwardPlan plan_forward(const AnalyzedSpecPtr& spec, const TileConfig& c, const Target& target) {
  if (std::optional<std::string> why = check_forward_shape(c)) reject(c, *why);
  if (target.pack_gqa < 1) reject(c, "pack_gqa must be >= 1");
  if (target.pack_gqa > 1)
    if (std::optional<std::string> why = gqa_packing_blocker(*spec))
      reject(c, "GQA packing is not possible: " + *why);
  if (target.varlen || target.paged)
    if (std::optional<std::string> why = varlen_blocker(*spec))
      reject(c, std::string(target.varlen ? "varlen" : "a paged K/V cache") + " is not possible: " + *why);
  if (target.page_size && (!target.paged || target.page_size < 0 || target.page_size % 16))
    reject(c, "page_size " + std::to_string(target.page_size) + " is not allowed: a positive multiple of 16, paged only");
  ForwardPlan p;
  p.spec = spec;
  p.config = c;
  p.target = target;
  const AttentionSpec& s = spec->spec;
  p.m_tiles = c.block_m / (16 * c.num_warps);
  p.threads = c.num_warps * 32;
  p.d_qk_pad = (s.head_dim_qk + 63) / 64 * 64;
  p.d_v_pad = (s.head_dim_v + 63) / 64 * 64;
  p.k_steps = (s.head_dim_qk + 15) / 16;
  p.wgmma = forward_mma_kind(c, target) == "wgmma";
  // mma.sync keeps Q fragments in registers when they are few (d_qk / 4 per m-tile), else re-reads
  // them per tile. wgmma always reads Q by shared-memory descriptor, as FlashAttention-3 does: no
  // wgmma A operand is held in registers across the kv loop, where ptxas 13.0 has been seen to
  // reuse those registers (docs/perf-notes.md §8).
  p.q_in_registers = !p.wgmma && p.m_tiles * s.head_dim_qk <= 128;
  p.smem = layout_smem(c, p.d_qk_pad, p.d_v_pad);
  const int o_bytes = c.block_m * s.head_dim_v * 2;  // one tile of O, where it is staged in shared memory
  p.compute_threads = p.threads;
  // wgmma's 128-byte swizzle works on absolute address bits, so its tiles need 1024-byte
  // alignment, which the dynamic shared-memory base does not promise: the kernel rounds its base
  // up, within 1 KB of slack.
  p.smem_align = p.wgmma ? kWgmmaAlignSlack : 1;
  p.shared_bytes = p.smem.total + (p.smem_align > 1 ? p.smem_align : 0);
  p.last_tile_first = p.spec->mask && !target.split_kv && !target.varlen;
  p.tiles_across_heads = p.last_tile_first && target.pack_gqa == 1 && p.wgmma && s.head_dim_qk <= 128 &&
                         key_range_grows_with_row(*spec);
  // The lazy rescale on the unmasked walks of d = 64's 96-key and d = 128's 176-key tiles: +0.9%
  // and +1.3% in sustained runs at the H100's power limit, where each of O's multiplies skipped is
  // power the clock gets back (docs/perf-notes.md §55). Flat on d = 128's 128-key tiles and on
  // d = 64 causal; 2.4% slower on causal 176-key walks.
  if (p.wgmma && !p.spec->mask && !p.spec->score && (shared_key_tiles(c) || wide_key_tiles(c))) p.grow_at = 8.f;
  p.dependent_launch = target.split_kv && combine_waits_on_device(target.sm());
  p.producer = !producer_blocker(p);
  if (p.producer) {
    p.threads += 128;
    p.persistent = true;
    p.tma = target.tma;
    split_registers(p);
    const bool rotates = p.attention().head_dim_qk <= 128 && p.attention().head_dim_v <= 128;
    p.rotated = rotates && !target.quick;
    p.quick = rotates && target.quick;
    if (wide_accumulators(p)) p.grow_at = 8.f;  // P ≤ 2^8, far inside bf16's and fp16's range
    p.kv_bars = p.rotated || c.num_stages == 1;
    // The stages' mbarriers, the persistent walk's eight (tile hand-over and Q buffers), then its
    // claimed tile index in two i32 slots (rounds alternate between them; 8 bytes keep the
    // mbarriers' 8-byte alignment for whatever follows).
    p.smem.walk_bars = 16 * c.num_stages * (p.kv_bars ? 2 : 1);
    p.smem.tile_slots = p.smem.walk_bars + 64;
    const int bytes = p.smem.tile_slots + 8;
    // A second Q buffer goes after the K/V stages (its offset a multiple of 1024, as wgmma's
    // swizzle needs), where the CTA still fits.
    if (p.shared_bytes + p.smem.q_bytes + bytes <= max_shared_bytes(target.arch)) {
      p.q_buffers = 2;
      p.smem.q2 = append_shared(p, p.smem.q_bytes);
    }
    // The staging buffer for O, where it still fits (d_v = 64 or 128: 16 or 32 KB beside the second
    // Q buffer); a row of 8 or 16 chunks of 16 bytes divides a warp's 32 lanes.
    if (p.q_buffers == 2 && (p.attention().head_dim_v == 64 || p.attention().head_dim_v == 128) &&
        p.shared_bytes + o_bytes + bytes <= max_shared_bytes(target.arch)) {
      p.staged_store = true;
      p.smem.o_stage = append_shared(p, o_bytes);
    }
    // With one Q buffer and d_v = 256 there is no room for a staging buffer. On one stage with TMA
    // loads (bm128_bn128_w8_s1, the heuristic's tile) O goes through the last step's V stage, which
    // frees Q for the next tile's load after the tile's last S (docs/perf-notes.md §48: +3.6% / +5.9%
    // at 1k none / causal); its warpgroups take turns (pingpong, §49). Otherwise Q is dead once the
    // tile's last product is waited for: O is staged there, and the next tile's Q loads after every
    // warp has read its rows out (§46).
    if (p.q_buffers == 1 && p.attention().head_dim_v == 256) {
      if (p.tma && p.kv_bars && c.num_stages == 1 && o_bytes <= p.smem.v_stage) {
        p.staged_store = p.stage_in_v = true;
        p.smem.o_stage = p.smem.v;
      } else if (o_bytes <= p.smem.q_bytes) {
        p.staged_store = p.stage_in_q = true;
        p.smem.o_stage = p.smem.q;
      }
    }
    // Every producer plan has two compute warpgroups (producer_blocker); the rotated and the
    // stage_in_v walks take turns between them (ForwardPlan::pingpong).
    p.pingpong = p.rotated || p.stage_in_v;
    p.smem.barriers = append_shared(p, bytes);
  } else if (cta_loads_by_tma(p)) {
    p.tma = true;
    p.wg_key_ranges = p.spec->mask && !p.has_map() && c.num_warps == 8 && p.m_tiles == 1;
    p.smem.barriers = append_shared(p, 16 * c.num_stages + 8);  // each stage's full and empty mbarriers, then Q's
    // d_v = 64: O staged in the Q buffer, dead after the walk, and stored by TMA (docs/perf-notes.md
    // §47: +2.6% at 1k on the H200, +3.8% on the H100; 4k and 16k within noise). Not measured at
    // d_v = 128, where the producer kernel serves the standard shapes. Not in a masked 96-key kernel:
    // there it measured flat (§53: +0.9% at 1k causal, −0.8% at 4k) and ptxas 13.0 spills 8 B within
    // the 128 registers two CTAs per SM leave (a row offset, stored before the walk).
    const bool spill_free = !(shared_key_tiles(c) && p.spec->mask);
    if (p.attention().head_dim_v == 64 && o_bytes <= p.smem.q_bytes && spill_free) {
      p.staged_store = p.stage_in_q = p.tma_store = true;
      p.smem.o_stage = p.smem.q;
    }
  }
  if (shared_key_tiles(c) &&
      (p.producer || !p.tma || s.head_dim_qk != 64 || s.head_dim_v != 64 || c.block_m != 128 || c.num_warps != 8))
    reject(c, kBlockN96);
  if (wide_key_tiles(c) &&
      (!p.producer || !p.tma || !target.moves_registers || s.head_dim_qk != 128 || s.head_dim_v != 128))
    reject(c, kBlockN176);
  if (p.shared_bytes > max_shared_bytes(target.arch))
    reject(c, "Q and " + std::to_string(c.num_stages) + " stages of K/V tiles need " + std::to_string(p.shared_bytes) +
                  " bytes of shared memory; " + target.arch + " allows " + std::to_string(max_shared_bytes(target.arch)) +
                  " per CTA");
  p.min_ctas_per_sm = min_ctas_per_sm(p);
  return p;
}

// Measured on the H200 under ptxas (docs/perf-notes.md §13, §16): at d=128 +13–22% over the
// CTA-wide kernel, at d=256 +15–22%; at d=192 0–8% slower, so off. Under the driver's JIT, which
// ignores setmaxnreg, d=128 still gained 1–7% but d=256 spilled 768 B, so d=256 needs ptxas.
// d=64 gets it only with tuner configs of one CTA per SM (four stages), which ran 6–27% slower
// than the heuristic's.
// Copies of partly filled 64-column panels (d not a multiple of 64) spill in the producer's
// registers (ptxas 13.0, d = 72–96). The three warpgroups take the whole register file, so it
// applies only where shared memory already allows one CTA per SM. Block maps take it too (§21:
// document masks +12–16% at d=128, +21–27% at d=256). Split-KV, varlen, paged K/V and GQA packing
// (the serving shapes, not measured with it) keep the CTA-wide pipeline.
std::optional<std::string> producer_blocker(const ForwardPlan& p) {
  const AttentionSpec& s = p.attention();
  if (!p.wgmma || p.config.num_warps != 8) return "it needs wgmma and two compute warpgroups (num_warps 8)";
  const bool whole_panels = s.head_dim_qk <= 128 && s.head_dim_v <= 128 && s.head_dim_qk % 64 == 0 && s.head_dim_v % 64 == 0;
  if (!whole_panels && !(s.head_dim_qk == 256 && s.head_dim_v == 256))
    return "head dims must be 64 or 128, or both 256 (whole 64-column panels, accumulators within 232 registers; the "
           "ones measured faster than the CTA-wide kernel)";
  if (!whole_panels && !p.target.moves_registers)
    return "at d = 256 the compute warpgroups need the 232 registers setmaxnreg gives them, and the driver's JIT "
           "ignores setmaxnreg (FLASHJIT_PTXAS=driver, or no ptxas found): they would spill";
  if (sm_shared_bytes(p.target.arch) / (p.shared_bytes + kSharedReservedPerCta) > 1)
    return "shared memory allows more than one CTA per SM, which a producer warpgroup's registers would take";
  if (serving_form(p.target)) return "split-KV, varlen, paged K/V and GQA packing keep the CTA-wide pipeline";
  return std::nullopt;
}

std::string ForwardPlan::describe() const {
  const AttentionSpec& s = attention();
  std::ostringstream o;
  o << "attention_fwd/" << (wgmma ? "wgmma" : "mma16816") << " " << (s.dtype == DType::f16 ? "fp16" : "bf16")
    << " d=" << s.head_dim_qk;
  if (s.head_dim_v != s.head_dim_qk) o << "/" << s.head_dim_v;
  o << " mask=" << (spec->mask ? s.mask : "none");
  if (spec->score) o << " score=" << s.score;
  if (has_map()) o << " +blockmap";
  if (producer) o << " +producer";
  if (persistent) o << " +persistent" << (q_buffers > 1 || stage_in_v ? "(q-ahead)" : "");
  if (rotated) o << " +rotated";
  if (quick) o << " +quick";
  if (pingpong) o << " +pingpong";
  if (staged_store) o << " +staged-store" << (stage_in_q ? "(q)" : stage_in_v ? "(v)" : "");
  if (tma_store) o << " +tma-store";
  if (grow_at > 0) o << " +lazy-rescale";
  if (tma) o << " +tma";
  if (wg_key_ranges) o << " +wg-key-ranges";
  if (last_tile_first) o << " +last-tile-first" << (tiles_across_heads ? "(heads)" : "");
  if (target.pack_gqa > 1) o << " +gqa" << target.pack_gqa;
  if (target.split_kv) o << (dependent_launch ? " +split(dependent-launch)" : " +split");
  if (target.varlen) o << " +varlen";
  if (target.paged) o << " +paged" << (target.page_size ? std::to_string(target.page_size) : "");
  o << " " << config.str() << " threads=" << threads << " smem=" << shared_bytes << "B";
  return o.str();
}

}  // namespace flashjit

#include "templates/bwd/plan.hpp"

#include <algorithm>
#include <sstream>
#include <vector>

#include "templates/common/arch_limits.hpp"
#include "templates/common/backward_abi.hpp"
#include "templates/fwd/plan.hpp"

namespace flashjit {

namespace {

[[noreturn]] void reject(const TileConfig& c, const std::string& why) {
  throw Error(ErrorKind::spec, "backward tile config " + c.str() + " cannot be built: " + why);
}

// 64 keys on 8 warps: two warpgroups sharing one key tile (BackwardPlan::warpgroup_split).
bool shares_key_tile(const TileConfig& c) { return c.num_warps == 8 && c.block_n == 64; }

bool wgmma_for(const Target& t, int rows, int warps) {
  return t.arch == "sm_90a" && t.allow_wgmma && (warps == 4 || warps == 8) && rows == 16 * warps;
}

// Shared memory and occupancy of one pass; `acc_cols` fp32 accumulator columns per row (the
// outputs) plus S and dP (cols each).
void layout(BackwardPass& p, const BackwardPlan& plan, int acc_cols, bool with_stats, bool with_dq, const char* what,
            const TileConfig& c) {
  p.threads = p.compute_threads = 32 * p.warps;
  p.m_tiles = p.rows / (16 * p.warps / p.roles);
  p.res_qk = 0;
  p.res_v = p.rows * plan.d_qk_pad * 2;
  p.str_qk_stage = p.cols * plan.d_qk_pad * 2;
  p.str_v_stage = p.cols * plan.d_v_pad * 2;
  p.str_qk = p.res_v + p.rows * plan.d_v_pad * 2;
  p.str_v = p.str_qk + p.stages * p.str_qk_stage;
  // The dK/dV kernel's streamed queries: their LSE and D (fp32) per stage.
  p.stats = p.str_v + p.stages * p.str_v_stage;
  p.stats_stage = with_stats ? 8 * p.cols : 0;
  int total = p.stats + p.stages * p.stats_stage;
  if (p.roles > 1) {
    p.p_share = (total + 15) / 16 * 16;
    total = p.p_share + p.p_buffers() * p.rows * p.cols * 4;
  }
  if (with_dq) {
    p.ds = (total + 1023) / 1024 * 1024;  // a wgmma operand: 1024-byte aligned
    p.dq = p.ds + p.ds_buffers * p.rows * p.cols * 2;
    total = p.dq + (p.cols / 64) * ((plan.attention().head_dim_qk + 63) / 64) * kDqBlockFloats * 4;
  }
  if (p.producer) {
    p.barriers = (total + 7) / 8 * 8;
    total = p.barriers + 16 * p.stages;
  }
  // wgmma's 128-byte swizzle needs 1024-byte aligned tiles (templates/fwd/plan.hpp).
  p.smem_align = p.wgmma ? kWgmmaAlignSlack : 1;
  p.shared_bytes = total + (p.wgmma ? kWgmmaAlignSlack : 0);
  const std::string& arch = plan.target.arch;
  if (p.shared_bytes > max_shared_bytes(arch))
    reject(c, std::string(what) + " needs " + std::to_string(p.shared_bytes) + " bytes of shared memory; " + arch +
                  " allows " + std::to_string(max_shared_bytes(arch)) + " per CTA");
  // S and dP per streamed tile; with dP in flight under S's softmax, dP, S, P and the score's
  // derivative are live at once there: two tiles more with a score modifier, one without.
  const int tiles = 2 + (p.dp_early ? 1 + (plan.spec->score ? 1 : 0) : 0);
  p.accumulators = p.rows * (acc_cols + tiles * p.cols) / (p.compute_threads / p.roles);
  // The forward's margins (templates/common/arch_limits.hpp) over the accumulators.
  const int need = p.accumulators + (p.wgmma ? kRegisterOverheadWgmma : kRegisterOverheadMmaSync);
  p.min_ctas_per_sm = ctas_per_sm(arch, p.shared_bytes, p.threads, need);
  if (p.producer) {
    // One CTA per SM (backward_producer_blocker): the launch's 168 registers per thread of 384,
    // 240 of them to each compute thread (FlashAttention-3's split), what is left to the producer.
    p.threads += 128;
    p.compute_registers = kBackwardComputeRegisters;
    p.producer_registers = producer_registers(p.compute_threads, p.compute_registers);
    if (!p.producer_registers)
      throw Error(ErrorKind::internal, "internal error: " + std::to_string(p.threads) +
                                           " threads leave the producer fewer registers than setmaxnreg's 24");
    p.min_ctas_per_sm = 1;
  }
}

// Why the dK/dV kernel has no producer warpgroup, or nothing (`p` laid out without one). The margin
// over the accumulators is the one the heuristic's d = 128 kernel has: 192 of them in 240 registers,
// assembled without spills.
std::optional<std::string> backward_producer_blocker(const BackwardPlan& p) {
  const AttentionSpec& s = p.attention();
  if (!p.target.backward_producer) return "FLASHJIT_BWD_PRODUCER=off";
  if (!p.kv.wgmma || p.kv.warps != 8)
    return "it needs wgmma and two compute warpgroups (num_warps 8: block_n 128, or 64 with dK and dV by warpgroup)";
  if (p.split_kv) return "dK and dV take two launches at this head dim";
  const bool whole_panels =
      (s.head_dim_qk == 64 || s.head_dim_qk == 128) && (s.head_dim_v == 64 || s.head_dim_v == 128);
  if (!whole_panels && !(s.head_dim_qk == 256 && s.head_dim_v == 256))
    return "head dims must be 64 or 128, or both 256 (the ones whose producer copies fit its 24 registers under "
           "ptxas 13: 256/192 spilled)";
  if (p.kv.accumulators + kProducerRegisterMargin > kBackwardComputeRegisters)
    return std::to_string(p.kv.accumulators) + " accumulator registers per compute thread leave fewer than " +
           std::to_string(kProducerRegisterMargin) + " of the " + std::to_string(kBackwardComputeRegisters) +
           " setmaxnreg gives them (128-query tiles at d = 128 spilled 400 bytes)";
  if (!p.target.moves_registers)
    return "the compute warpgroups need the 240 registers setmaxnreg gives them, and the driver's JIT ignores "
           "setmaxnreg (FLASHJIT_PTXAS=driver, or no ptxas found)";
  // Occupancy as laid out without it (shared memory and the register estimate): where a second CTA
  // would fit, the producer's registers would take it. 32-query tiles leave shared memory for two,
  // but their registers (over 128 per thread under ptxas 13) already allow only one.
  if (p.kv.min_ctas_per_sm > 1)
    return "shared memory and registers allow " + std::to_string(p.kv.min_ctas_per_sm) +
           " CTAs per SM, which a producer warpgroup's registers would take";
  return std::nullopt;
}

}  // namespace

TileConfig backward_heuristic(const AnalyzedSpec& spec, const Target& target, std::string* reason) {
  const int d = std::max(spec.spec.head_dim_qk, spec.spec.head_dim_v);
  // Key tiles of 128 (8 warps, two warpgroups), as FlashAttention-2's backward uses; above d = 128
  // dK and dV take two launches (plan_backward). Each thread holds (d_qk + d_v) / 2 accumulators
  // plus S, dP (and the score's derivative) over block_m / 2 columns: query tiles of 32 keep that
  // spill-free under ptxas 13 where 64 would not (tests/test_codegen_backward.cpp).
  // 64-query tiles fit up to d = 128 with wgmma and no score modifier (11% faster than 32 at d = 128,
  // 16k causal; docs/perf-notes.md §10).
  const bool wide = d <= 64 || (d <= 128 && !spec.score && wgmma_for(target, 128, 8));
  TileConfig c = wide ? TileConfig{64, 128, 8, 2} : TileConfig{32, 128, 8, 2};
  // At d <= 64 with wgmma, 64 keys on one warpgroup (two CTAs per SM) measured 5–16% faster than 128
  // keys on two (docs/perf-notes.md §10, attempt 8).
  // Without a score modifier, 128-query tiles in one stage: +5% at 16k and +1.5% at 4k over 64 in
  // two, −2.4% at 1k causal (docs/perf-notes.md §16, §18); with one (its derivative's registers)
  // the 128-query kernel spilled under ptxas 13.
  if (d <= 64 && wgmma_for(target, 64, 4)) c = spec.score ? TileConfig{64, 64, 4, 2} : TileConfig{128, 64, 4, 1};
  // Above d = 192 the wgmma dK kernel with a score modifier spills on 8 warps and not on 4. Without
  // one, 128 keys on 8 warps measured 1.11–1.23× faster than 64 on 4 at every standard shape and
  // within 5% of the tuner's pick (docs/perf-notes.md §24).
  std::vector<TileConfig> order = {c, {c.block_m, c.block_n, c.num_warps, 1}, {32, 64, 4, 2}, {32, 64, 4, 1}};
  if (d > 192 && spec.score && wgmma_for(target, 64, 4)) order.insert(order.begin(), TileConfig{32, 64, 4, 2});
  // FLASHJIT_BWD_WARPGROUPS=on: where one warpgroup cannot hold dK and dV together, 64 keys with one
  // of them per warpgroup, in one launch (plan_backward; docs/perf-notes.md §25). Not with a score
  // modifier: its derivative's registers spill the first warpgroup at some head-dim pairs
  // (136/256 with softcap: 48 B under ptxas 13).
  const bool by_warpgroup = target.backward_warpgroups && !spec.score && wgmma_for(target, 64, 4) &&
                            spec.spec.head_dim_qk + spec.spec.head_dim_v > 256;
  if (by_warpgroup) order.insert(order.begin(), TileConfig{32, 64, 8, 2});
  // The first that fits shared memory: K, V, and the stages of Q, dO and their LSE and D.
  const int pad = (spec.spec.head_dim_qk + 63) / 64 * 64 + (spec.spec.head_dim_v + 63) / 64 * 64;
  for (const TileConfig& t : order) {
    c = t;
    const int stats = t.num_stages * 8 * t.block_m;
    const int shared_p = shares_key_tile(t) ? t.block_n * t.block_m * 4 : 0;
    if ((t.block_n + t.num_stages * t.block_m) * pad * 2 + stats + shared_p + kWgmmaAlignSlack <=
        max_shared_bytes(target.arch))
      break;
  }
  const bool roles = shares_key_tile(c);
  if (reason)
    *reason = "backward heuristic for d=" + std::to_string(d) +
              (roles                                       ? ", wgmma, dK and dV by warpgroup"
               : wgmma_for(target, c.block_n, c.num_warps) ? ", wgmma"
                                                           : ", mma.sync") +
              ": " + c.str();
  return c;
}

std::optional<double> mean_query_walk(const AnalyzedSpec& spec, int64_t seq_q, int64_t seq_kv,
                                      const std::vector<ParamValue>& params) {
  if (!spec.mask) return double(seq_q);
  if (spec.block_map.needed || !spec.q_range.exact || seq_kv <= 0) return std::nullopt;
  dsl::SymbolValues values;
  values.seq_q = seq_q;
  values.seq_kv = seq_kv;
  std::vector<dsl::Value> given = spec.dsl.default_params();
  for (const ParamValue& v : params)
    if (int slot = spec.dsl.param_slot(v.name); slot >= 0)
      given[size_t(slot)] = spec.dsl.params[size_t(slot)].type == dsl::Type::I32
                                ? dsl::Value::of_i32(static_cast<int32_t>(v.value))
                                : dsl::Value::of_f32(static_cast<float>(v.value));
  for (const dsl::Value& v : given) values.params.emplace_back(v);
  const dsl::SymbolValues swapped = dsl::swapped_sizes(values);
  if (dsl::kv_range_may_overflow(spec.q_range, swapped, &spec.dsl.tensors)) return std::nullopt;
  for (const dsl::KvBand& band : spec.q_range.visit)
    for (const auto* forms : {&band.lower, &band.upper, &band.guards})
      for (const dsl::LinearForm& f : *forms)
        if (f.mentions(dsl::Sym::B) || f.mentions(dsl::Sym::H) || f.mentions(dsl::Sym::HKv)) return std::nullopt;
  constexpr int64_t kTile = 128;
  double rows = 0;
  int64_t tiles = 0;
  for (int64_t kv0 = 0; kv0 < seq_kv; kv0 += kTile, ++tiles) {
    const dsl::TileKvRange r = dsl::eval_q_range(spec.q_range, kv0, std::min(seq_kv, kv0 + kTile), swapped);
    rows += double(std::max<int64_t>(0, r.visit_hi - r.visit_lo));
  }
  return rows / double(tiles);
}

TileConfig backward_heuristic_for(const AnalyzedSpecPtr& spec, const Target& target, const ProblemShape& shape,
                                  const std::vector<ParamValue>& params, std::string* reason) {
  const TileConfig table = backward_heuristic(*spec, target, reason);
  // Measured at d = 64 (docs/perf-notes.md §32): 3.5–10% faster from 4096 query rows per key tile
  // (4k and 16k without a mask, 16k causal), 1% slower at 2048, 5–12% slower at 512–1024.
  constexpr double kLongWalk = 4096;
  const AttentionSpec& s = spec->spec;
  if (s.head_dim_qk > 64 || s.head_dim_v > 64 || spec->score || shape.seq_q < kLongWalk) return table;
  const std::optional<double> walk = mean_query_walk(*spec, shape.seq_q, shape.seq_kv, params);
  if (!walk || *walk < kLongWalk) return table;
  const TileConfig c{64, 128, 8, 2};
  try {
    const BackwardPlan p = plan_backward(spec, c, target);
    if (!p.kv.producer || !p.fused_dq) return table;
  } catch (const Error&) {
    return table;
  }
  if (reason)
    *reason = "backward heuristic for d=" + std::to_string(std::max(s.head_dim_qk, s.head_dim_v)) + " on a walk of " +
              std::to_string(int64_t(*walk)) + " query rows per key tile, wgmma, producer, dQ fused: " + c.str();
  return c;
}

std::optional<std::string> check_backward_shape(const TileConfig& c) {
  if (c.num_warps != 2 && c.num_warps != 4 && c.num_warps != 8)
    return "num_warps must be 2, 4 or 8 (the dK/dV kernel's CTA)";
  if (c.block_n != 16 * c.num_warps && c.block_n != 32 * c.num_warps && !shares_key_tile(c))
    return "block_n must be 16 or 32 × num_warps (each warp owns one or two 16-row mma tiles of keys), or 64 on 8 "
           "warps (two warpgroups sharing the key tile)";
  if (c.block_m != 32 && c.block_m != 64 && c.block_m != 128)
    return "block_m must be 32, 64 or 128 (query tiles streamed past the keys, pairs of 8-column mma tiles)";
  if (c.num_stages < 1 || c.num_stages > 3) return "num_stages must be 1 to 3 (Q/dO tiles in flight)";
  return std::nullopt;
}

TileSpace backward_search_space(const AnalyzedSpec& spec) {
  const int d = std::max(spec.spec.head_dim_qk, spec.spec.head_dim_v);
  if (d <= 128) return {{32, 64, 128}, {64, 128}, {4, 8}, {1, 2}};
  return {{32, 64}, {64, 128}, {4, 8}, {1, 2}};
}

BackwardPlan plan_backward(const AnalyzedSpecPtr& spec, const TileConfig& c, const Target& target) {
  if (std::optional<std::string> why = check_backward_shape(c)) reject(c, *why);
  BackwardPlan p;
  p.spec = spec;
  p.config = c;
  p.target = target;
  const AttentionSpec& s = spec->spec;
  p.d_qk_pad = (s.head_dim_qk + 63) / 64 * 64;
  p.d_v_pad = (s.head_dim_v + 63) / 64 * 64;
  p.k_steps_qk = (s.head_dim_qk + 15) / 16;
  p.k_steps_v = (s.head_dim_v + 15) / 16;
  p.split_kv = (c.block_n / (16 * c.num_warps)) * (s.head_dim_qk + s.head_dim_v) / 2 > 128;
  if (shares_key_tile(c)) {
    if (!target.backward_warpgroups)
      reject(c, "64 keys on 8 warps gives one key tile's dV and dK to the two warpgroups, which is off "
                "(FLASHJIT_BWD_WARPGROUPS=on enables it)");
    if (!wgmma_for(target, 64, 4)) reject(c, "two warpgroups on one key tile need wgmma (sm_90a)");
    if (s.head_dim_qk + s.head_dim_v <= 256)
      reject(c, "two warpgroups on one key tile only pay where dK and dV do not fit one warpgroup's registers "
                "together (d_qk + d_v > 256)");
    p.warpgroup_split = true;
    p.kv.roles = 2;
  }

  p.kv.rows = c.block_n;
  p.kv.cols = c.block_m;
  p.kv.warps = c.num_warps;
  p.kv.stages = c.num_stages;
  p.kv.wgmma = wgmma_for(target, p.kv.rows, p.kv.warps / p.kv.roles);
  const int kv_acc =
      p.split_kv || p.warpgroup_split ? std::max(s.head_dim_qk, s.head_dim_v) : s.head_dim_qk + s.head_dim_v;
  const char* kv_what = "the dK/dV kernel (K and V resident, Q and dO streamed)";
  // dP in flight under the softmax costs block_m / 2 registers per thread, as S does: taken where the
  // dK/dV accumulators ((d_qk + d_v) / 2) and both tiles fit in 128 of the 255, which ptxas 13
  // compiles without spills (tests/test_codegen_backward.cpp); at d = 128 it spills.
  p.kv.dp_early = p.kv.wgmma && !p.warpgroup_split && (s.head_dim_qk + s.head_dim_v) / 2 + c.block_m <= 128;
  // At d_qk <= 64 dQ is added in the dK/dV kernel only where that kernel has a producer warpgroup and
  // 64-query tiles: without one it was as fast as the dQ kernel or slower (docs/perf-notes.md §10),
  // with one it is faster on long walks (§32); 128-query tiles spill under ptxas 13 (32–772 bytes).
  bool fuses_with_producer = false;  // the d_qk <= 64 note alone stands in the way, on 64-query tiles
  if (!p.kv.wgmma) p.fused_dq_note = "dQ by its own kernel: accumulating it in the dK/dV kernel needs wgmma";
  else if (p.split_kv) p.fused_dq_note = "dQ by its own kernel: dK and dV take two launches at this head dim";
  else if (p.warpgroup_split) p.fused_dq_note = "dQ by its own kernel: dK and dV take the two warpgroups at this head dim";
  else if (c.block_m % 64) p.fused_dq_note = "dQ by its own kernel: its wgmma needs block_m a multiple of 64";
  else if (s.head_dim_qk <= 64) {
    p.fused_dq_note =
        "dQ by its own kernel: at d_qk <= 64 it is added in the dK/dV kernel only with a producer "
        "warpgroup and 64-query tiles (docs/perf-notes.md §32)";
    fuses_with_producer = c.block_m == 64;
  } else if (s.head_dim_qk % 64 || (s.head_dim_v > 64 && s.head_dim_v % 64))
    p.fused_dq_note = "dQ by its own kernel: with a head dim between 64 and 128 that is not 128, ptxas 13 serialises "
                      "the wgmma of the kernel that adds dQ (insufficient register resources)";
  const std::string why_not_fused = p.fused_dq_note;
  auto layout_kv = [&] {
    const bool may_fuse = why_not_fused.empty() || (fuses_with_producer && p.kv.producer);
    p.fused_dq = false;
    p.fused_dq_note = why_not_fused;
    // With a producer, two dSᵀ buffers where they fit, else one.
    for (int buffers = p.kv.producer ? 2 : 1; may_fuse && !p.fused_dq && buffers >= 1; --buffers) {
      p.kv.ds_buffers = buffers;
      try {
        layout(p.kv, p, kv_acc, true, true, kv_what, c);
        p.fused_dq = true;
      } catch (const Error& e) {
        p.fused_dq_note = std::string("dQ by its own kernel: ") + e.what();
      }
    }
    if (p.fused_dq) {
      p.fused_dq_note.clear();
    } else {
      p.kv.ds_buffers = 1;
      layout(p.kv, p, kv_acc, true, false, kv_what, c);
    }
  };
  layout_kv();
  p.kv_producer_note = backward_producer_blocker(p).value_or("");
  if (p.kv_producer_note.empty()) {
    const BackwardPlan without = p;
    p.kv.producer = true;
    try {
      layout_kv();
    } catch (const Error& e) {  // its mbarriers and second hand-over buffer
      p = without;
      p.kv_producer_note = std::string("no room for its mbarriers and second P buffer: ") + e.what();
    }
  }

  const int d = std::max(s.head_dim_qk, s.head_dim_v);
  p.q.cols = d <= 128 ? 64 : 32;
  // Two stages of K/V where they fit, else one (the dQ kernel's tiles are not part of the config).
  auto layout_q = [&](int rows, int warps, bool must) {
    p.q.rows = rows;
    p.q.warps = warps;
    p.q.wgmma = wgmma_for(target, p.q.rows, p.q.warps);
    p.q.dp_early = p.q.wgmma;  // one dQ accumulator of d_qk / 2 per thread: room for dP at every head dim
    for (p.q.stages = 2;; --p.q.stages) {
      try {
        layout(p.q, p, s.head_dim_qk, false, false, "the dQ kernel (Q and dO resident, K and V streamed)", c);
        return true;
      } catch (const Error&) {
        if (p.q.stages > 1) continue;
        if (must) throw;
        return false;
      }
    }
  };
  layout_q(64, 4, true);
  // Where shared memory leaves room for one 64-query CTA per SM (Q and dO of d_qk above 192), its
  // one warpgroup would run alone there, the tensor cores idle under each softmax: the CTA takes
  // 128 queries on two warpgroups instead, each with one warpgroup's registers, sharing each K/V tile.
  if (p.q.wgmma && p.q.min_ctas_per_sm == 1) {
    const BackwardPass one_warpgroup = p.q;
    if (!layout_q(128, 8, false)) p.q = one_warpgroup;
  }
  return p;
}

BackwardEntries backward_entries(const BackwardPlan& plan, const std::string& entry) {
  const bool map = plan.spec->block_map.needed;
  BackwardEntries n{entry, plan.split_kv ? entry + "_dv" : "", entry + "_dq", entry + "_prep", map ? entry + "_mapq" : "",
                    map ? entry + "_mapkv" : ""};
  if (plan.fused_dq) {
    n.dkdv_det = entry + "_kv";
    n.dq_convert = entry + "_dqc";
  }
  return n;
}

std::string BackwardPlan::describe() const {
  const AttentionSpec& s = attention();
  std::ostringstream o;
  o << "attention_bwd/" << (kv.wgmma ? "wgmma" : "mma16816") << " " << (s.dtype == DType::f16 ? "fp16" : "bf16")
    << " d=" << s.head_dim_qk;
  if (s.head_dim_v != s.head_dim_qk) o << "/" << s.head_dim_v;
  o << " mask=" << (spec->mask ? s.mask : "none");
  if (spec->score) o << " score=" << s.score;
  o << " " << config.str() << (split_kv ? " dK,dV split" : "") << (warpgroup_split ? " dK,dV by warpgroup" : "")
    << (fused_dq ? " dQ fused" : "") << (kv.dp_early ? " dP early" : "") << (kv.producer ? " producer" : "")
    << (kv.ds_buffers > 1 ? " dS x2" : "") << " dkdv: threads=" << kv.threads << " smem=" << kv.shared_bytes
    << "B; dq: " << q.rows << "x" << q.cols << " s" << q.stages << (q.wgmma ? " wgmma" : " mma16816")
    << " smem=" << q.shared_bytes << "B";
  return o.str();
}

}  // namespace flashjit

#include "templates/forward_plan.hpp"

#include "compiler/dsl/desugar.hpp"
#include "compiler/spec_bridge.hpp"
#include "support/knobs.hpp"

#include <algorithm>
#include <sstream>

namespace flashjit {

namespace {

// Shared memory one CTA may use, by arch (CUDA C Programming Guide, "Compute Capabilities" table).
int max_shared_bytes(const std::string& arch) {
  if (arch == "sm_80") return 163 * 1024;
  if (arch == "sm_90" || arch == "sm_90a") return 227 * 1024;
  return 99 * 1024;
}

// Shared memory of one SM, and what the driver reserves per CTA (same table: 228 KB on sm_90,
// 164 KB on sm_80, 100 KB on sm_86/89; 1 KB per CTA).
int sm_shared_bytes(const std::string& arch) {
  if (arch == "sm_80") return 164 * 1024;
  if (arch == "sm_90" || arch == "sm_90a") return 228 * 1024;
  return 100 * 1024;
}
constexpr int kSharedReservedPerCta = 1024;

// Registers per thread beyond the accumulators (addresses, softmax state, loop control, mask
// terms). With it, the wgmma d = 64 kernel (64 + 32 + 16 accumulator registers) fits 168, the
// budget of 3 CTAs of 128 threads, as ptxas 13.0 does without spilling (docs/perf-notes.md §7).
// mma.sync also holds K and V fragments from ldmatrix: at 56, its d = 160 kernel was held to 168
// and spilled 16 B.
constexpr int kRegisterOverheadWgmma = 56;
constexpr int kRegisterOverheadMmaSync = 88;

int min_ctas_per_sm(const ForwardPlan& p, const std::string& arch) {
  const TileConfig& c = p.config;
  const int accumulators = (c.block_m * c.block_n + c.block_m * p.spec.head_dim_v +
                            (p.q_in_registers ? c.block_m * p.spec.head_dim_qk / 2 : 0)) / p.threads;
  const int need = accumulators + (p.wgmma ? kRegisterOverheadWgmma : kRegisterOverheadMmaSync);
  const int by_smem = sm_shared_bytes(arch) / (p.shared_bytes + kSharedReservedPerCta);
  for (int n = by_smem; n > 1; --n)
    if (std::min(255, 65536 / (n * p.threads) / 8 * 8) >= need) return n;
  return 1;
}

[[noreturn]] void reject(const TileConfig& c, const std::string& why) {
  throw Error(ErrorKind::spec, "tile config " + c.str() + " cannot be built: " + why);
}

}  // namespace

std::string mma_kind(const TileConfig& c, const std::string& arch) {
  const bool whole_warpgroups = (c.num_warps == 4 || c.num_warps == 8) && c.block_m == 16 * c.num_warps;
  return arch == "sm_90a" && whole_warpgroups && knob::get("FLASHJIT_MMA") == "auto" ? "wgmma" : "mma.sync";
}

TileConfig heuristic_config(const AttentionSpec& spec, const std::string& arch, std::string* reason) {
  const int d = std::max(spec.head_dim_qk, spec.head_dim_v);
  TileConfig c;  // {block_m, block_n, num_warps, num_stages}
  // wgmma (sm_90a), measured on the H200 (docs/perf-notes.md §5, bf16, 4k, batch 4, hidden 2048):
  // one warpgroup with 128-key tiles at d ≤ 64; two warpgroups (8 warps, 128 rows) at larger d,
  // with 128-key tiles up to d = 128 and 64-key tiles above (192 KB of shared memory at d = 256).
  // mma.sync (sm_80, FLASHJIT_MMA=sync; §2 and §4): two m-tiles per warp at d ≤ 64 (each K/V
  // fragment feeds 4 mma); at d = 128 one m-tile and 64-key tiles (two m-tiles are 8% faster but
  // spill, so only the tuner picks them); above, 64-key tiles and one stage (2 CTAs per SM).
  if (d <= 64) c = {64, 128, 4, 2};
  else if (d <= 128) c = {128, 128, 8, 2};
  else c = {128, 64, 8, 2};
  const bool wgmma = mma_kind(c, arch) == "wgmma";
  if (!wgmma) {
    if (d <= 64) c = {128, 64, 4, 2};
    else if (d <= 128) c = {64, 64, 4, 2};
    else c = {64, 64, 4, 1};
  }
  if (reason)
    *reason = "heuristic table for d=" + std::to_string(d) + (wgmma ? ", wgmma" : ", mma.sync") +
              ": " + c.str();
  return c;
}

ForwardPlan plan_forward(const AttentionSpec& spec, const TileConfig& c, const std::string& reason,
                         const std::string& arch) {
  ForwardPlan p;
  p.dsl = to_dsl(spec);
  p.spec = spec;
  p.config = c;
  p.config_reason = reason;
  p.arch = arch;
  if (p.dsl.mask) {
    p.mask = dsl::desugar(p.dsl.mask, &p.dsl.tensors);
    p.kv_range = dsl::derive_kv_range(p.dsl.mask, &p.dsl.tensors);
    p.block_map = !p.kv_range.exact;
    p.map_per_batch = dsl::mentions(*p.mask, dsl::Builtin::B);
    p.map_per_head = dsl::mentions(*p.mask, dsl::Builtin::H) || dsl::mentions(*p.mask, dsl::Builtin::HKv);
  }
  if (p.dsl.score) p.score = dsl::desugar(p.dsl.score, &p.dsl.tensors);
  if (c.num_warps != 1 && c.num_warps != 2 && c.num_warps != 4 && c.num_warps != 8)
    reject(c, "num_warps must be 1, 2, 4 or 8 (a CTA of at most 256 threads)");
  if (c.block_m != 16 * c.num_warps && c.block_m != 32 * c.num_warps)
    reject(c, "block_m must be 16 or 32 × num_warps: each warp owns one or two 16-row mma tiles of queries");
  p.m_tiles = c.block_m / (16 * c.num_warps);
  if (c.block_n != 32 && c.block_n != 64 && c.block_n != 128)
    reject(c, "block_n must be 32, 64 or 128 (pairs of 8-key mma tiles; 128 holds 64 scores per thread)");
  if (c.num_stages < 1 || c.num_stages > 4)
    reject(c, "num_stages must be 1 to 4 (K/V tiles in flight through the cp.async pipeline)");
  p.threads = c.num_warps * 32;
  p.d_qk_pad = (spec.head_dim_qk + 63) / 64 * 64;
  p.d_v_pad = (spec.head_dim_v + 63) / 64 * 64;
  p.k_steps = (spec.head_dim_qk + 15) / 16;
  p.wgmma = mma_kind(c, arch) == "wgmma";
  // mma.sync: Q fragments stay in registers when they are few (d_qk/4 per m-tile); else re-read per
  // tile. wgmma always reads Q by shared-memory descriptor, as FlashAttention-3 does: with Q as a
  // register A operand held across the kv loop, ptxas (CUDA 13.0, and the H200's 580 driver JIT)
  // gave the Q registers to P inside the loop at d = 64 with 64-key tiles, so every QKᵀ after the
  // first multiplied by the previous tile's P (SASS: both HGMMA groups read R88–R103; max error
  // 0.27–0.84). The descriptor costs ~1% at d = 128 (docs/perf-notes.md §8).
  p.q_in_registers = !p.wgmma && p.m_tiles * spec.head_dim_qk <= 128;
  ForwardSmem& m = p.smem;
  m.k_stage = c.block_n * p.d_qk_pad * 2;
  m.v_stage = c.block_n * p.d_v_pad * 2;
  m.q = 0;
  m.k = c.block_m * p.d_qk_pad * 2;
  m.v = m.k + c.num_stages * m.k_stage;
  m.total = m.v + c.num_stages * m.v_stage;
  // wgmma's 128-byte swizzle works on absolute address bits, so its tiles need 1024-byte
  // alignment, which the dynamic shared-memory base does not promise (measured: wrong results
  // below 48 KB on the H200): the kernel rounds its base up, within 1 KB of slack.
  p.shared_bytes = m.total + (p.wgmma ? kWgmmaAlignSlack : 0);
  if (p.shared_bytes > max_shared_bytes(arch))
    reject(c, "Q and " + std::to_string(c.num_stages) + " stages of K/V tiles need " + std::to_string(p.shared_bytes) +
                  " bytes of shared memory; " + arch + " allows " + std::to_string(max_shared_bytes(arch)) + " per CTA");
  p.min_ctas_per_sm = min_ctas_per_sm(p, arch);
  return p;
}

void record_plan(const ForwardPlan& plan, CompiledKernel& out) {
  out.entry = plan.entry;
  out.description = plan.describe();
  out.map_entry = plan.block_map ? plan.entry + "_blockmap" : "";
  out.map_per_batch = plan.block_map && plan.map_per_batch;
  out.map_per_head = plan.block_map && plan.map_per_head;
  out.threads = plan.threads;
  out.shared_bytes = plan.shared_bytes;
}

std::string ForwardPlan::describe() const {
  std::ostringstream s;
  s << "attention_fwd/" << (wgmma ? "wgmma" : "mma16816") << " " << (spec.dtype == DType::f16 ? "fp16" : "bf16") << " d=" << spec.head_dim_qk;
  if (spec.head_dim_v != spec.head_dim_qk) s << "/" << spec.head_dim_v;
  s << " mask=" << (mask ? spec.mask : "none");
  if (score) s << " score=" << spec.score;
  if (block_map) s << " +blockmap";
  s << " " << config.str() << " threads=" << threads << " smem=" << shared_bytes << "B";
  return s.str();
}

}  // namespace flashjit

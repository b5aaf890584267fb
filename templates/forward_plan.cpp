#include "templates/forward_plan.hpp"

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

[[noreturn]] void reject(const TileConfig& c, const std::string& why) {
  throw Error(ErrorKind::spec, "tile config " + c.str() + " cannot be built: " + why);
}

}  // namespace

TileConfig heuristic_config(const AttentionSpec& spec, std::string* reason) {
  // Per lane and query row the kernel keeps d_v/32 accumulators, m, l and block_n/32 scores in
  // registers; 8 rows per warp keep that under ~100 registers up to d = 256 (ptxas -v: no spills).
  // Up to d = 64, 16 rows per warp halve the K/V tile loads per query row.
  const int d = std::max(spec.head_dim_qk, spec.head_dim_v);
  TileConfig c;
  c.num_warps = 4;
  c.block_n = 32;
  c.num_stages = 1;
  const int rows_per_warp = d <= 64 ? 16 : 8;
  c.block_m = c.num_warps * rows_per_warp;
  if (reason)
    *reason = "heuristic table (FLASHJIT_AUTOTUNE=off): d=" + std::to_string(d) + " → " +
              std::to_string(rows_per_warp) + " rows/warp, 4 warps, block_n 32";
  return c;
}

ForwardPlan plan_forward(const AttentionSpec& spec, const TileConfig& c, const std::string& reason,
                         const std::string& arch) {
  spec.validate();
  ForwardPlan p;
  p.spec = spec;
  p.config = c;
  p.config_reason = reason;
  p.arch = arch;
  p.causal = spec.mask == "causal";
  if (c.num_warps != 1 && c.num_warps != 2 && c.num_warps != 4 && c.num_warps != 8)
    reject(c, "num_warps must be 1, 2, 4 or 8 (a CTA of at most 256 threads)");
  if (c.block_m <= 0 || c.block_m % c.num_warps != 0)
    reject(c, "block_m must be a positive multiple of num_warps (each warp owns block_m/num_warps rows)");
  p.rows_per_warp = c.block_m / c.num_warps;
  if (p.rows_per_warp > 16)
    reject(c, "more than 16 query rows per warp: their accumulators would not fit in registers");
  if (c.block_n != 32 && c.block_n != 64)
    reject(c, "block_n must be 32 or 64: each of the 32 lanes scores block_n/32 keys");
  if (c.num_stages != 1)
    reject(c, "num_stages must be 1: this scalar template does not pipeline its K/V loads "
              "(the multi-stage cp.async pipeline comes with the tensor-core template)");
  p.threads = c.num_warps * 32;
  p.keys_per_lane = c.block_n / 32;
  p.pairs_v = (spec.head_dim_v + 63) / 64;
  ForwardSmem& m = p.smem;
  m.k_stride = spec.head_dim_qk + 2;
  m.q = 0;
  m.k = m.q + c.block_m * spec.head_dim_qk * 4;
  m.v = m.k + ((c.block_n * m.k_stride * 2 + 15) / 16) * 16;
  m.p = m.v + c.block_n * spec.head_dim_v * 2;
  m.total = m.p + c.num_warps * p.rows_per_warp * c.block_n * 4;
  p.shared_bytes = m.total;
  if (p.shared_bytes > max_shared_bytes(arch))
    reject(c, "Q, K, V and P tiles need " + std::to_string(p.shared_bytes) + " bytes of shared memory; " + arch +
                  " allows " + std::to_string(max_shared_bytes(arch)) + " per CTA");
  return p;
}

std::string ForwardPlan::describe() const {
  std::ostringstream s;
  s << "attention_fwd/scalar " << (spec.dtype == DType::f16 ? "fp16" : "bf16") << " d=" << spec.head_dim_qk;
  if (spec.head_dim_v != spec.head_dim_qk) s << "/" << spec.head_dim_v;
  s << " mask=" << spec.mask << " " << config.str() << " threads=" << threads << " smem=" << shared_bytes << "B";
  return s.str();
}

}  // namespace flashjit

// The instantiation of the forward template: spec + tile config → every number the code needs,
// with the limits checked first (a config that breaks one is rejected with the limit named).
#pragma once

#include <string>

#include "flashjit/flashjit.hpp"

namespace flashjit {

// Shared memory of one CTA, in bytes from the dynamic base, in this order.
struct ForwardSmem {
  int q = 0;        // [block_m][d_qk] f32, pre-scaled by scale·log2(e)
  int k = 0;        // [block_n][d_qk + 2] 16-bit; the 4-byte pad makes lane-per-key reads conflict-free
  int v = 0;        // [block_n][d_v] 16-bit
  int p = 0;        // [num_warps][rows_per_warp][block_n] f32 probabilities, broadcast to the warp
  int total = 0;
  int k_stride = 0; // elements per K row in shared memory
};

struct ForwardPlan {
  AttentionSpec spec;
  TileConfig config;
  std::string config_reason;
  std::string arch;
  bool causal = false;
  int threads = 0;
  int rows_per_warp = 0;   // query rows each warp owns (block_m / num_warps)
  int keys_per_lane = 0;   // block_n / 32: lane l scores keys l, l + 32, ...
  int pairs_v = 0;         // output element pairs per lane (ceil(d_v / 64))
  ForwardSmem smem;
  int shared_bytes = 0;
  std::string entry;       // kernel symbol
  std::string describe() const;
};

// The heuristic table used until the autotuner lands (DESIGN §6, FLASHJIT_AUTOTUNE=off).
TileConfig heuristic_config(const AttentionSpec& spec, std::string* reason);

// Throws Error(spec) naming the violated limit when `config` cannot be built for `spec` on `arch`.
ForwardPlan plan_forward(const AttentionSpec& spec, const TileConfig& config, const std::string& reason,
                         const std::string& arch);

}  // namespace flashjit

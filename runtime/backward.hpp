// The backward modules of a Kernel: one per tile config, compiled (through the compile cache) and
// loaded on first use, then shared read-only; and the config of each shape bucket (given, stored
// tuning, tuned on first use, or the heuristic), chosen as Kernel::forward's dispatch chooses.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/handles.hpp"
#include "runtime/launch.hpp"
#include "runtime/module.hpp"
#include "templates/bwd/plan.hpp"

namespace flashjit::rt {

struct BackwardModule {
  std::shared_ptr<Context> ctx;
  CompiledKernel compiled;
  LoadedModule loaded;           // function: the dK/dV kernel (dK only when split)
  cu::CUfunction dv = nullptr;   // dV only, when the plan splits dK and dV
  cu::CUfunction dq = nullptr, prep = nullptr;
  // plan.fused_dq: the dK/dV kernel without dQ (deterministic calls) and the workspace's conversion.
  cu::CUfunction dkdv_det = nullptr, dq_convert = nullptr;
  cu::CUfunction map_q = nullptr, map_kv = nullptr;  // masks with a block map
  BackwardPlan plan;             // the launch geometry of each kernel
  int registers = 0, spill_bytes = 0;           // of the dK/dV kernel
  int dq_registers = 0, dq_spill_bytes = 0;
  ~BackwardModule();
};

// Compiles (compile cache first) and loads the backward of `source.spec` with `config`, the
// backward heuristic's when empty. Error(spec) when a kernel needs more shared memory than the
// device allows per block. `reason` replaces the plan's config_reason when given ("tuned").
std::shared_ptr<const BackwardModule> load_backward(const std::shared_ptr<Context>& ctx, const KernelSource& source,
                                                    const std::optional<TileConfig>& config,
                                                    const char* reason = nullptr);

// The D pre-pass (after the block maps, for masks that have them), then the dK/dV kernel (or its
// dK and dV halves) and the dQ kernel — or, with plan.fused_dq and a call that is not
// deterministic, the dK/dV kernel that also sums dQ and its conversion — on args.stream with
// stream-ordered workspace. `launch` is
// the call's pack_backward result; its workspace slots are filled here.
// `map`: the caller's maps (Kernel::build_backward_block_map, checked by the caller), else the
// map pre-passes run first.
void launch_backward(const BackwardModule& m, const AnalyzedSpec& spec, const BackwardArgs& args,
                     BackwardLaunch& launch, const BlockMap::Impl* map = nullptr);

// Bytes of the backward's block maps for a call's sizes at `plan`'s tile sizes.
struct BackwardMapSizes {
  size_t q_tiles = 0, q_counts = 0;    // key tiles per query tile (the dQ kernel's)
  size_t kv_tiles = 0, kv_counts = 0;  // query tiles per key tile (the dK/dV kernel's)
};
BackwardMapSizes backward_map_sizes(const AnalyzedSpec& spec, const BackwardPlan& plan, const ProblemShape& shape);
// What the maps depend on besides tensor contents: sizes, the plan's tile sizes, param values.
std::vector<uint64_t> backward_map_key(const BackwardArgs& a, const BackwardLaunch& launch, size_t params,
                                       const BackwardPlan& plan);
// The map pre-passes into the buffers set in `launch` on args.stream: the keys' map and, with
// `q_map`, the dQ kernel's.
void run_backward_map_passes(const BackwardModule& m, const BackwardArgs& args, BackwardLaunch& launch, bool q_map);

// A Kernel's backward modules and per-bucket choices; guarded by Kernel::Impl::backward_mu.
struct BackwardState {
  std::shared_ptr<const BackwardModule> base;  // CompileOptions::backward_config or the heuristic
  std::map<std::string, std::shared_ptr<const BackwardModule>> by_config;  // config name → module
  std::map<std::string, std::shared_ptr<const BackwardModule>> by_bucket;  // bucket text → module
};

// The kernel's base backward module (loaded now if it was not yet).
const BackwardModule& backward_base(const detail::Access::KernelImpl& k);
// The module for this call's shape bucket: the base when CompileOptions::backward_config was set
// or autotune is off; else the bucket's stored tuning, or one tuned now (FLASHJIT_AUTOTUNE
// quick/full with tune_on_first_use, not while the stream captures a graph), else the base.
const BackwardModule& backward_for(const detail::Access::KernelImpl& k, const BackwardArgs& args);

}  // namespace flashjit::rt

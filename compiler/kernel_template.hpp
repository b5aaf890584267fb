// Kernel templates: the families of kernels flashjit generates (forward, its block-map pre-pass;
// later backward and decode), each registered once by name with its own version. The pipeline
// (compiler/pipeline.cpp) reaches a template only through this interface.
#pragma once

#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/analyzed_spec.hpp"
#include "flashjit/flashjit.hpp"

namespace llvm {
class Module;
}  // namespace llvm

namespace flashjit {

// What code is generated for, with every knob already read (at the API boundary, not here).
struct Target {
  std::string arch;          // sm_80 | sm_86 | sm_89 | sm_90 | sm_90a
  bool allow_wgmma = true;   // false: FLASHJIT_MMA=sync (or CompileOptions::mma = "sync")
  // The forward with GQA packing (FlashAttention-3's pack_gqa): a CTA's rows are the
  // (position, head) pairs of this many query heads sharing one K/V head, so K and V are read
  // once per group. 1: one query head per CTA. The runtime asks for it per launch (decode).
  int pack_gqa = 1;
  // The forward's split-KV form (Flash-Decoding): each CTA walks one of num_splits runs of its key
  // tiles and writes fp32 partials; the module adds the combine kernel. Its own module, so the
  // unsplit kernels carry none of this code. The runtime asks for it when a launch splits.
  bool split_kv = false;
  // The forward over packed sequences of different lengths (FlashAttention's varlen): per-sequence
  // lengths and token offsets come from cu_seqlens (templates/common/forward_abi.hpp).
  bool varlen = false;
  // The forward over a paged K/V cache (vLLM's PagedAttention layout): K/V rows found through a
  // block table, per-sequence key counts from seqused_kv (templates/common/forward_abi.hpp).
  bool paged = false;
  // Paged: the page size (rows) the copies are specialised for, a positive multiple of 16; 0: read
  // at run time. A page size that divides the key tile, or that the key tile divides, makes a tile's
  // table lookups one per page instead of one per copied row (tile/copy.hpp).
  int page_size = 0;
  // FLASHJIT_TMA (on unless set off; the pipeline sets this from it): the forward loads Q, K and V
  // with the TMA unit through tensor maps the runtime encodes per launch (ForwardPlan::tma) — from
  // the producer warpgroup's first thread, or the CTA-wide kernel's — instead of cp.async.
  bool tma = true;
  // The assembler honours setmaxnreg (ptxas does; the driver's JIT allocates every thread the
  // launch's share and ignores it, runtime/assembler.hpp). Plans whose speed rests on moving
  // registers between warpgroups ask it.
  bool moves_registers = true;
  // FLASHJIT_BWD_WARPGROUPS (on unless set off; the pipeline sets this from it): the backward
  // accepts configs whose two warpgroups share one key tile, one accumulating dV and the other dK
  // (BackwardPlan::warpgroup_split).
  bool backward_warpgroups = false;
  // FLASHJIT_BWD_PRODUCER (the pipeline sets this from it): the backward's dK/dV kernel takes a
  // producer warpgroup where BackwardPlan allows one (BackwardPass::producer).
  bool backward_producer = false;
  // The forward's quick form, for a tiered compile (runtime/upgrade.hpp): each step of a producer
  // plan waits for its S product before issuing P·V instead of taking the rotated walk. Both walks
  // do the same arithmetic in the same order, and this one LLVM and ptxas compile in ~30% less time
  // at d = 128 (docs/perf-notes.md §65). A plan with no rotated walk is the same kernel either way.
  bool quick = false;

  int sm() const;  // sm_number(arch)
};

// The compute capability a PTX target names, as a number: "sm_90a" → 90 (0 for anything else).
inline int sm_number(const std::string& arch) {
  return arch.rfind("sm_", 0) == 0 ? std::atoi(arch.c_str() + 3) : 0;
}
inline int Target::sm() const { return sm_number(arch); }

// A launch's fixed facts, as the runtime needs them.
struct LaunchFacts {
  int threads = 0;           // per CTA
  int shared_bytes = 0;      // dynamic shared memory per CTA
  bool has_map = false;      // the module also holds entry + "_blockmap", the block-map pre-pass
  bool map_per_batch = false, map_per_head = false;
  bool persistent = false;   // walks its tiles from any grid: launched with at most one CTA per SM
  int tensor_maps = 0;       // how many tensor maps it takes last (templates/common/forward_abi.hpp)
  bool has_combine = false;  // the module also holds entry + "_combine", split-KV's combine
};

// One kernel module, planned: limits checked and every number the code needs decided. Planning
// is cheap (no parsing, no LLVM): a compile-cache hit plans too, to describe what it loads.
class KernelPlan {
 public:
  virtual ~KernelPlan() = default;
  // "name@version" of every template whose code the module holds: part of the kernel key.
  virtual std::vector<std::string> template_versions() const = 0;
  // What else besides spec, config and arch decides the code (e.g. "wgmma"): part of the key.
  virtual std::string variant() const = 0;
  // One line for logs, dumps and CompiledKernel::description.
  virtual std::string describe() const = 0;
  virtual LaunchFacts launch() const = 0;
  // A tiered compile's quick form (runtime/upgrade.hpp), which the full kernel replaces: compiled
  // with less effort wherever that cannot change a result. NVPTX then generates code at
  // CodeGenOptLevel::Default instead of Aggressive (compile_planned) and ptxas assembles at -O1
  // instead of its default -O3 (assembler_level).
  virtual bool quick() const { return false; }
  // Writes the module's kernels; `entry` names the main one.
  virtual void emit(llvm::Module& module, const std::string& entry) const = 0;
};

// The values each tile parameter may take when autotuning; their cross product, filtered by
// KernelTemplate::check_shape, is the search space.
struct TileSpace {
  std::vector<int> block_m, block_n, num_warps, num_stages;
};

struct KernelTemplate {
  std::string name;      // "attention_fwd"
  std::string version;   // bumped whenever the template's generated code changes
  std::string symbol;    // entry points are "flashjit_<symbol>_<key>"
  // The tile config when the caller gives none, and why (the heuristic table's row).
  std::function<TileConfig(const AnalyzedSpec&, const Target&, std::string* reason)> heuristic;
  // The template's structural rule for a tile config: why it is not a shape the template builds,
  // or nothing. The autotuner enumerates only configs that pass it.
  std::function<std::optional<std::string>(const TileConfig&)> check_shape;
  // The autotuner's space for a spec: the template's defaults, narrowed by the spec's `tune` section.
  std::function<TileSpace(const AnalyzedSpec&)> search_space;
  // Plans one kernel; Error(spec) names the limit a config breaks (structural or resources).
  std::function<std::unique_ptr<KernelPlan>(const AnalyzedSpecPtr&, const TileConfig&, const Target&)> plan;
};

// Registers a template at static-initialisation time (one `static const bool` per template).
bool register_template(KernelTemplate t);
// Error(internal) naming the registered templates when `name` is not one of them.
const KernelTemplate& find_template(std::string_view name);
std::vector<const KernelTemplate*> registered_templates();

}  // namespace flashjit

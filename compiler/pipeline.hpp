// The compiler's stages, in order (compiler/pipeline.cpp); compile_to_ptx in flashjit.hpp is its
// public face, the runtime's compile cache (runtime/kernel_cache.cpp) its other caller.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "compiler/analyzed_spec.hpp"
#include "compiler/kernel_key.hpp"
#include "compiler/kernel_template.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit {

// Stage names, in order, as dumped under FLASHJIT_DUMP_DIR/<key>/ (the runtime adds cubin, module).
inline constexpr const char* kStages[] = {"spec", "analyze", "plan", "llvm-ir", "opt", "ptx"};

// Which kernel to build for an analysed spec.
struct KernelRequest {
  std::string template_name = "attention_fwd";
  Target target;
  std::optional<TileConfig> config;  // empty: the template's heuristic
};

// A kernel planned and keyed, not yet compiled: what a compile-cache lookup needs.
struct PlannedKernel {
  AnalyzedSpecPtr spec;
  const KernelTemplate* kernel_template = nullptr;
  Target target;
  TileConfig config;
  std::string config_reason;  // the heuristic's row, or "given by the caller"
  std::shared_ptr<const KernelPlan> plan;
  KernelKey key;
  std::string entry;          // "flashjit_<symbol>_<key hash>"
  double plan_ms = 0;
  // Every CompiledKernel field but the code (llvm_ir, ptx, stages).
  CompiledKernel describe() const;
};

// Where a compile writes its stages and reads overrides, and whether it prints the IR.
struct StageOptions {
  std::string dump_dir;      // FLASHJIT_DUMP_DIR; "" = no dump
  std::string override_dir;  // FLASHJIT_OVERRIDE_DIR; "" = no override
  bool keep_llvm_ir = true;
};

// The knobs of CompileOptions read at the API boundary: arch (empty → `default_arch`) and
// FLASHJIT_MMA; dump and override folders; whether to print IR (`keep_ir_default` when unset).
Target target_for(const CompileOptions& options, const std::string& default_arch);
// CompileOptions::tiered, else FLASHJIT_TIERED: "on", "off" or "quick" (Error(usage) otherwise).
std::string tiered_mode(const CompileOptions& options);
StageOptions stage_options(const CompileOptions& options, bool keep_ir_default);

// Stage `plan`: the template's tile plan (limits checked: Error(spec) names the one a config
// breaks) and the kernel key. No LLVM.
PlannedKernel plan_kernel(const AnalyzedSpecPtr& spec, const KernelRequest& request);

// Stages spec … ptx of a planned kernel: records, logs, dumps each; llvm-ir and ptx may be
// replaced from the override folder.
CompiledKernel compile_planned(const PlannedKernel& planned, const StageOptions& options);

}  // namespace flashjit

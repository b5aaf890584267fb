// PTX → cubin (driver JIT through cuLink*) → loaded module and function.
#pragma once

#include <string>

#include "compiler/kernel_template.hpp"
#include "runtime/assembler.hpp"
#include "runtime/context.hpp"
#include "support/ptxas.hpp"

namespace flashjit::rt {

struct LoadedModule {
  cu::CUmodule module = nullptr;
  cu::CUfunction function = nullptr;
  cu::CUfunction map_function = nullptr;  // the block-map pre-pass, when the kernel has one
  cu::CUfunction combine_function = nullptr;  // split-KV's combine, in forward modules
  int ctas_per_sm = 0;    // occupancy of `function` at its block size and shared memory (0: unknown)
  std::string cubin;      // what ptxas or cuLinkComplete produced (later cached on disk)
  std::string jit_log;    // the assembler's log (registers, spills), after a line naming it
  double link_ms = 0, load_ms = 0;
};

// The assembler's optimisation level for a plan's module: 1 for a quick form (KernelPlan::quick),
// else 3, ptxas' default.
inline int assembler_level(const KernelPlan& plan) { return plan.quick() ? 1 : 3; }

// The kernel's PTX (for its `arch`) → cubin by `as` → the loaded module with its `entry`,
// `map_entry` and `combine_entry` (when not empty) functions.
// Must be called with `ctx` current. PTX that `as` does not assemble is Error(compile) with its
// error log (generated code: a flashjit bug, or a ptxas unfit for this PTX, which the message
// says how to bypass), or, when `override_dir` is the folder of this kernel's FLASHJIT_OVERRIDE_DIR
// files, Error(usage) naming that folder (the user's code). Out of device memory while linking or
// loading is Error(out_of_memory); another load failure is Error(cuda) naming the kernel. Nothing
// stays loaded after a failure. `early`, when `as` is a ptxas, is that ptxas already started for
// `c`'s arch (build_kernel's before_llvm); it gets the PTX instead of a new process. `level` is the
// plan's assembler_level: ptxas' -O, or the driver JIT's CU_JIT_OPTIMIZATION_LEVEL when under 3
// (the JIT's own default is 4).
LoadedModule load_module(const Assembler& as, const CompiledKernel& c, const std::string& override_dir = "",
                         ptxas::Job* early = nullptr, int level = 3);

// cuModuleLoadData of `out.cubin` and the functions `c` names (`entry`, and `map_entry` and
// `combine_entry` when not empty) into `out`; nothing stays loaded on failure. Only functions the
// plan says the module holds are looked up: a lookup that fails is an error, never a probe (a
// probe's CUDA_ERROR_NOT_FOUND shows up in the caller's compute-sanitizer reports).
void load_functions(LoadedModule& out, const CompiledKernel& c);

}  // namespace flashjit::rt

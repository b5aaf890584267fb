// PTX → cubin (driver JIT through cuLink*) → loaded module and function.
#pragma once

#include <string>

#include "runtime/assembler.hpp"
#include "runtime/context.hpp"

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

// The kernel's PTX (for its `arch`) → cubin by `as` → the loaded module with its `entry`,
// `map_entry` (when not empty) and split-KV combine functions.
// Must be called with `ctx` current. PTX that `as` does not assemble is Error(compile) with its
// error log (generated code: a flashjit bug, or a ptxas unfit for this PTX, which the message
// says how to bypass), or, when `override_dir` is the folder of this kernel's FLASHJIT_OVERRIDE_DIR
// files, Error(usage) naming that folder (the user's code). Out of device memory while linking or
// loading is Error(out_of_memory); another load failure is Error(cuda) naming the kernel. Nothing
// stays loaded after a failure.
LoadedModule load_module(const Assembler& as, const CompiledKernel& c, const std::string& override_dir = "");

// cuModuleLoadData of `out.cubin` and the module's functions (`entry`, the block map's `map_entry`
// when not empty, the split-KV combine when present) into `out`; nothing stays loaded on failure.
void load_functions(LoadedModule& out, const std::string& entry, const std::string& map_entry);

// The module's `<entry>_combine` kernel (templates/fwd/combine.hpp), or null when it has none (the
// backward's modules).
cu::CUfunction find_combine(cu::CUmodule module, const std::string& entry);

}  // namespace flashjit::rt

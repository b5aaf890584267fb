// The compile cache in the compile path: a planned kernel + device → PTX + cubin + launch
// metadata, from <cache_dir>/kernels/ when the key matches (LLVM does not run), else compiled
// (LLVM → PTX, then the driver's cuLink → cubin) and stored. Runtime::compile and the autotuner
// both come through here; autotune/compile_cache.hpp is the storage underneath.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "compiler/pipeline.hpp"
#include "flashjit/flashjit.hpp"
#include "runtime/context.hpp"
#include "runtime/module.hpp"

namespace flashjit::rt {

// FLASHJIT_CACHE_MAX_BYTES parsed (Error(usage) naming the knob when it is not a size).
uint64_t compile_cache_max_bytes();

// ---- the compile step with the cache -------------------------------------------------------------

struct KernelCacheSettings {
  std::string root;                   // "" → cache_dir()
  std::optional<uint64_t> max_bytes;  // empty → FLASHJIT_CACHE_MAX_BYTES
  int driver_version = 0;             // part of the key; 0 = no driver (entries hold PTX only)
  std::string assembler;              // part of the key: Assembler::id() ("" or "driver": the driver's JIT)
  bool enabled = true;                // false: compile, never read or write the cache
  bool read = true;                   // false: compile and store over the entry (one that did not load)
  bool compile = true;                // false: a lookup only; a miss (or a bypassed cache) compiles nothing
};

// What the driver step produced for a freshly compiled kernel (the cubin is what gets cached).
struct LinkResult {
  std::string cubin;
  int registers = -1, spill_bytes = -1;  // -1: unknown
};
// PTX → cubin (cuLink). Null: compile-only (no driver); entries are stored with an empty cubin.
using Linker = std::function<LinkResult(const CompiledKernel&)>;

struct KernelBuild {
  CompiledKernel compiled;  // on a hit: no llvm_ir and no stages (LLVM did not run)
  std::string cubin;        // empty when compile-only
  int registers = -1, spill_bytes = -1;
  bool cache_hit = false;
  bool linked = false;      // the Linker ran in this call (its module may already be loaded)
  std::string key_text;     // the full cache key ("" when bypassed)
  std::string key_hash;     // SHA-256 of key_text: the entry's file name
  std::string cache_status; // "hit <hash>", "miss, stored <hash>", "bypassed: FLASHJIT_OVERRIDE_DIR is set", ...
};

// The compile cache key text: the kernel key (compiler/kernel_key.hpp), the driver version and the
// assembler (Assembler::id(); "" and "driver" both mean the driver's JIT, the key it always had).
// FLASHJIT_OVERRIDE_DIR bypasses the cache instead of keying it.
std::string compile_cache_key(const KernelKey& key, int driver_version, const std::string& assembler = "");

// Compiles a planned kernel through the cache. Bypasses it (info log, says why) when an override
// dir is set; skips the read (still stores) when a dump dir is set, so the stages get dumped. A
// hit whose cubin is empty (stored compile-only) is linked now and rewritten. A failed cache
// write is a warning. Errors of the compile itself propagate unchanged.
// `before_llvm`, when set, runs each time LLVM is about to run, so that an assembler can start
// loading while the PTX is generated (support/ptxas.hpp's Job).
KernelBuild build_kernel(const PlannedKernel& planned, const StageOptions& stages, const KernelCacheSettings& settings,
                         const Linker& link, const std::function<void()>& before_llvm = {});

// Process-wide counters (tests, `flashjit info`, the docs' "what a user sees").
struct KernelCacheCounters {
  uint64_t hits = 0, misses = 0, stores = 0, store_failures = 0, bypasses = 0;
  uint64_t llvm_compiles = 0;  // compiles (LLVM runs) made by build_kernel
};
KernelCacheCounters kernel_cache_counters();

// ---- on a device ----------------------------------------------------------------------------------

// One tile config of a spec, compiled (through the cache) and loaded. The caller owns `loaded`
// (unload_module when done).
struct CompiledModule {
  CompiledKernel compiled;
  LoadedModule loaded;
  int registers = 0, spill_bytes = 0;
  std::string assembler;  // Assembler::id() of the cubin's assembler
  bool cache_hit = false;
  std::string cache_status;
};

// Runtime::compile's work: compile (cache) → shared-memory check against the device's opt-in limit
// (Error(spec)) → load → MAX_DYNAMIC_SHARED_SIZE_BYTES when over 48 KB → registers/spills → the
// dump dir's cubin/module.txt → an info log line. Pushes `ctx` itself. A cached cubin the driver
// does not load (damaged with a valid checksum, or one this driver rejects) is a miss with a warning
// naming the entry and the driver's error: the kernel is compiled again and the entry replaced.
// Out of device memory while loading is not a damaged entry: it propagates.
// With `cached_only`, a lookup: the module when the cache holds a cubin for it that loads, else an
// empty one (`loaded.module` null) and nothing compiled.
CompiledModule compile_and_load(const Context& ctx, const PlannedKernel& planned, const StageOptions& stages,
                                bool cached_only = false);
// cuModuleUnload in `ctx`; never throws (failures only leak).
void unload_module(const Context& ctx, LoadedModule& loaded);

// The cubin with every occurrence of the entry names replaced by a fixed string, hashed: configs
// whose code is identical (only the symbol name, which embeds the config, differs) get equal hashes.
std::string binary_fingerprint(const std::string& cubin, const CompiledKernel& compiled);

}  // namespace flashjit::rt

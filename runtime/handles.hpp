// What the public handles (Runtime, Kernel) hold, and how the runtime builds a Kernel: from an
// analysed spec, never from a spec it would parse again.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "compiler/analyzed_spec.hpp"
#include "compiler/pipeline.hpp"
#include "flashjit/flashjit.hpp"
#include "runtime/context.hpp"
#include "runtime/module.hpp"

namespace flashjit {

namespace rt {

class KernelDispatch;
class Upgrade;
struct CompiledModule;

// Everything every config of one Runtime::compile call shares.
struct KernelSource {
  AnalyzedSpecPtr spec;
  Target target;         // the device's arch and the FLASHJIT_MMA choice
  StageOptions stages;   // dump / override folders
  std::optional<TileConfig> backward_config;  // empty: the backward's heuristic
};

// How Kernel::forward picks a config per shape bucket.
struct DispatchOptions {
  std::optional<std::string> autotune;  // "off" | "quick" | "full"; empty → FLASHJIT_AUTOTUNE
  bool tune_on_first_use = true;        // false: use stored tunings, never tune in forward()
  std::optional<double> tune_deadline_s;
  bool config_given = false;            // CompileOptions::config was set: always that config
};

}  // namespace rt

// Hidden: the handles' insides are no part of the library's exported API (their outer classes are).
#define FLASHJIT_HIDDEN __attribute__((visibility("hidden")))

struct FLASHJIT_HIDDEN Runtime::Impl {
  std::shared_ptr<rt::Context> ctx;
};

namespace rt {
struct BackwardState;  // runtime/backward.hpp
}  // namespace rt

struct FLASHJIT_HIDDEN BlockMap::Impl {
  const void* kernel = nullptr;   // the Kernel::Impl it was built for
  bool backward = false;          // built by build_backward_block_map
  std::vector<uint64_t> key;      // sizes, tile sizes and params it is valid for
  DeviceBuffer tiles, counts;     // forward: key tiles per query tile; backward: query tiles per key tile
  DeviceBuffer q_tiles, q_counts; // backward: key tiles per query tile (the dQ kernel's)
};

struct FLASHJIT_HIDDEN Kernel::Impl {
  std::shared_ptr<rt::Context> ctx;
  AnalyzedSpecPtr spec;  // parsed, checked and analysed once; every launch reads it
  rt::KernelSource source;
  rt::DispatchOptions dispatch_options;  // how Kernel::forward and Kernel::backward pick configs
  // The backward's modules and per-bucket choices, made on first use under the mutex.
  mutable std::mutex backward_mu;
  mutable std::unique_ptr<rt::BackwardState> backward;
  CompiledKernel compiled;
  rt::LoadedModule loaded;
  int registers = 0, spill_bytes = 0;
  // The config per shape bucket (tuned / heuristic / given); borrows `compiled` and `loaded`,
  // owns the modules of other configs.
  std::unique_ptr<rt::KernelDispatch> dispatch;
  // A tiered compile's full kernel, compiling while `compiled` (the quick form) serves; null when
  // `compiled` is the full kernel (runtime/upgrade.hpp).
  std::unique_ptr<rt::Upgrade> upgrade;
  // The full kernel's module once it has loaded; null before, and when `compiled` is the full kernel.
  const rt::CompiledModule* full() const;
  ~Impl();
};

namespace detail {

struct Access {
  using KernelImpl = Kernel::Impl;
  static Kernel wrap(std::shared_ptr<const Kernel::Impl> impl) {
    Kernel k;
    k.impl_ = std::move(impl);
    return k;
  }
  // Error(usage) for an empty handle, naming the method `what`.
  static const Kernel::Impl& impl(const Kernel& k, const char* what);
  static const std::shared_ptr<rt::Context>& context(const Runtime& r, const char* what);
  // A Runtime handle on a kernel's context: its alloc() makes DeviceBuffers there.
  static Runtime runtime(std::shared_ptr<rt::Context> ctx);
};

}  // namespace detail

namespace rt {

// One config of `source` (the template's heuristic when empty), compiled through the compile
// cache and loaded, with its per-bucket dispatch. `tiered`: where tiered_compile_allowed and the
// cache does not hold the kernel, load its quick form when it has one and compile the full kernel
// in the background (runtime/upgrade.hpp); the tuner, which times what it compiles, passes false.
Kernel compile_kernel(const std::shared_ptr<Context>& ctx, const KernelSource& source,
                      const std::optional<TileConfig>& config, const DispatchOptions& dispatch, bool tiered = false);

}  // namespace rt

}  // namespace flashjit

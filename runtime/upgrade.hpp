// A tiered compile (CompileOptions::tiered or FLASHJIT_TIERED "on", the default). Where the
// compile cache has no entry for the kernel Runtime::compile would load, and that kernel has a
// quick form (Target::quick: the forward without its rotated walk), Runtime::compile loads the
// quick form and returns; an Upgrade compiles and loads the full kernel on a thread of its own,
// and launches take it from the first one after it has loaded. Both forms give the same output and
// LSE bit for bit (a [gpu] test checks it), so only the time of the early launches depends on when
// the swap happens. The compile cache keeps the full kernel: a later process loads it at once.
#pragma once

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "compiler/pipeline.hpp"
#include "runtime/context.hpp"
#include "runtime/kernel_cache.hpp"

namespace flashjit::rt {

// Whether a tiered compile (tiered_mode "on") may serve a quick form first: no dump or override
// folder is set (those ask for the stages of the kernel that runs).
bool tiered_compile_allowed(const StageOptions& stages);

class Upgrade {
 public:
  // Starts compiling `full` (through the compile cache, which then holds it) in `ctx`.
  Upgrade(std::shared_ptr<Context> ctx, PlannedKernel full, StageOptions stages);
  // Waits for the compile (LLVM cannot be stopped part-way), then unloads the module.
  ~Upgrade();
  Upgrade(const Upgrade&) = delete;
  Upgrade& operator=(const Upgrade&) = delete;

  // The full kernel once it has loaded; null before, and for good when its compile failed (a
  // warning names the kernel and the error; the quick form, which gives the same results, stays).
  const CompiledModule* ready() const { return ready_.load(std::memory_order_acquire); }
  // Blocks until the compile has ended; then ready().
  const CompiledModule* wait() const;

 private:
  void run();
  std::shared_ptr<Context> ctx_;
  PlannedKernel full_;
  StageOptions stages_;
  CompiledModule module_;
  std::atomic<const CompiledModule*> ready_{nullptr};
  std::shared_future<void> done_;
  std::thread thread_;
};

}  // namespace flashjit::rt

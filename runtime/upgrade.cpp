#include "runtime/upgrade.hpp"

#include <condition_variable>
#include <cstdlib>
#include <mutex>

#include "support/log.hpp"

namespace flashjit::rt {
namespace {

// Compiles still running. exit() waits for them (a handler registered with the first), so that a
// Kernel still alive when the program ends (held by a global, or by Python at shutdown) does not
// leave a compile running while static objects, LLVM's among them, are destroyed under it.
struct Running {
  std::mutex mu;
  std::condition_variable idle;
  int count = 0;
};
Running& running() {
  static Running* r = new Running;  // never destroyed: the exit handler uses it
  return *r;
}
void wait_for_running() {
  Running& r = running();
  std::unique_lock<std::mutex> lock(r.mu);
  r.idle.wait(lock, [&] { return r.count == 0; });
}

}  // namespace

bool tiered_compile_allowed(const StageOptions& stages) {
  return stages.dump_dir.empty() && stages.override_dir.empty();
}

Upgrade::Upgrade(std::shared_ptr<Context> ctx, PlannedKernel full, StageOptions stages)
    : ctx_(std::move(ctx)), full_(std::move(full)), stages_(std::move(stages)) {
  std::promise<void> done;
  done_ = done.get_future().share();
  {
    static std::once_flag handler;
    std::call_once(handler, [] { std::atexit(wait_for_running); });
    std::lock_guard<std::mutex> lock(running().mu);
    ++running().count;
  }
  thread_ = std::thread([this, done = std::move(done)]() mutable {
    run();
    done.set_value();
    Running& r = running();
    {
      std::lock_guard<std::mutex> lock(r.mu);
      --r.count;
    }
    r.idle.notify_all();
  });
}

Upgrade::~Upgrade() {
  if (thread_.joinable()) thread_.join();
  if (ready()) unload_module(*ctx_, module_.loaded);
}

const CompiledModule* Upgrade::wait() const {
  done_.wait();
  return ready();
}

void Upgrade::run() {
  // A failure is not silent, and not an error of the call that has already returned: the quick
  // form gives the same results, only slower.
  auto failed = [&](const std::string& why) {
    log::warn("tiered compile: the full kernel " + full_.key.hash + " (" + full_.config.str() + ") of " +
              full_.spec->spec.name + " failed, so its quick form keeps serving (the same results, slower): " + why);
  };
  try {
    module_ = compile_and_load(*ctx_, full_, stages_);
    ready_.store(&module_, std::memory_order_release);
  } catch (const std::exception& e) {
    failed(e.what());
  } catch (...) {
    failed("an exception that is not a std::exception");
  }
}

}  // namespace flashjit::rt

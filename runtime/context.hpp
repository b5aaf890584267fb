// The CUDA context a Runtime works in, and a guard that makes it current for one call.
#pragma once

#include <memory>

#include "flashjit/flashjit.hpp"
#include "runtime/driver.hpp"

namespace flashjit::rt {

struct Context {
  cu::CUcontext ctx = nullptr;
  cu::CUdevice device = 0;
  bool owns_primary = false;  // true: we retained the primary context and release it
  DeviceInfo info;
  ~Context();
};

// The caller's current context when it is on `ordinal`, else the device's primary context.
std::shared_ptr<Context> open_context(int ordinal);

// Pushes the context for the guard's lifetime (cheap when it is already current).
class ContextGuard {
 public:
  explicit ContextGuard(const Context& c);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;
};

}  // namespace flashjit::rt

// The CUDA context a Runtime works in, and a guard that makes it current for one call.
#pragma once

#include <memory>
#include <mutex>

#include "flashjit/flashjit.hpp"
#include "runtime/driver.hpp"

namespace flashjit::rt {

struct Context {
  cu::CUcontext ctx = nullptr;
  cu::CUdevice device = 0;
  bool owns_primary = false;  // true: we retained the primary context and release it
  DeviceInfo info;
  ~Context();

  // The pool launch scratch comes from (scratch.hpp), created on first use. It keeps up to
  // FLASHJIT_SCRATCH_KEEP bytes mapped across synchronisations: a pool with the driver's default
  // release threshold (0) unmaps its free memory at every synchronisation, and the next call's
  // stream-ordered allocation maps it again — on the H200 that doubled a synchronised 48 µs
  // split-KV decode call (docs/perf-notes.md §12.4).
  cu::CUmemoryPool scratch_pool() const;

 private:
  mutable std::once_flag pool_once_;
  mutable cu::CUmemoryPool pool_ = nullptr;
};

// The caller's current context when it is on `ordinal`, else the device's primary context.
std::shared_ptr<Context> open_context(int ordinal);

// Error(usage) "<call>: stream 0x… …" unless `stream` is NULL or a stream of `c`'s context (checked
// with cuStreamGetCtx, which also answers for the special handles CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD: the current context). A destroyed stream is named as such when the driver
// reports it (any failure of cuStreamGetCtx, e.g. CUDA_ERROR_INVALID_HANDLE); a stream of another
// context (another device's, or a second context on this device, cuCtxCreate) is named with both
// contexts, before anything is allocated or launched. Call with `c` current (a ContextGuard).
void check_stream(const Context& c, void* stream, const char* call);

// cu::check for a launch on the caller's `stream`: CUDA_ERROR_INVALID_HANDLE there (a stream
// destroyed after check_stream passed, or one the driver could not tell apart from a live one) is
// Error(usage) naming the stream, as check_stream's errors do.
void check_launch(cu::CUresult r, const char* what, void* stream);

// Pushes the context for the guard's lifetime (cheap when it is already current).
class ContextGuard {
 public:
  explicit ContextGuard(const Context& c);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;
};

}  // namespace flashjit::rt

#include "runtime/context.hpp"

#include <cstdio>

#include "runtime/assembler.hpp"
#include "support/knobs.hpp"
#include "support/log.hpp"

namespace flashjit::rt {

namespace {

DeviceInfo query(cu::CUdevice dev, int ordinal) {
  const cu::Driver& d = cu::driver();
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  cu::check(d.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName");
  info.name = name;
  auto attr = [&](int a, const char* what) {
    int v = 0;
    cu::check(d.cuDeviceGetAttribute(&v, a, dev), what);
    return v;
  };
  info.cc_major = attr(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cuDeviceGetAttribute(compute capability)");
  info.cc_minor = attr(cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cuDeviceGetAttribute(compute capability)");
  info.sm_count = attr(cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "cuDeviceGetAttribute(SM count)");
  info.shared_per_block = attr(cu::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "cuDeviceGetAttribute(shared/block)");
  info.shared_per_block_optin =
      attr(cu::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "cuDeviceGetAttribute(shared/block opt-in)");
  info.shared_per_sm = attr(cu::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, "cuDeviceGetAttribute(shared/SM)");
  info.l2_bytes = attr(cu::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "cuDeviceGetAttribute(L2)");
  cu::check(d.cuDriverGetVersion(&info.driver_version), "cuDriverGetVersion");
  info.assembler = assembler(info.driver_version).id();  // FLASHJIT_PTXAS's mistakes surface here
  return info;
}

}  // namespace

Context::~Context() {
  // A pool with allocations still in flight is released by the driver when they are freed.
  if (pool_) cu::driver().cuMemPoolDestroy(pool_);
  if (owns_primary) cu::driver().cuDevicePrimaryCtxRelease(device);
}

cu::CUmemoryPool Context::scratch_pool() const {
  std::call_once(pool_once_, [this] {
    const cu::Driver& d = cu::driver();
    cu::CUmemPoolProps props{};
    props.allocType = cu::CU_MEM_ALLOCATION_TYPE_PINNED;
    props.locationType = cu::CU_MEM_LOCATION_TYPE_DEVICE;
    props.locationId = device;
    cu::CUmemoryPool pool = nullptr;
    cu::check(d.cuMemPoolCreate(&pool, &props), "cuMemPoolCreate(launch scratch)");
    uint64_t keep = knob::parse_size(knob::get("FLASHJIT_SCRATCH_KEEP"), "FLASHJIT_SCRATCH_KEEP");
    if (cu::CUresult r = d.cuMemPoolSetAttribute(pool, cu::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
        r != cu::CUDA_SUCCESS) {
      d.cuMemPoolDestroy(pool);
      cu::check(r, "cuMemPoolSetAttribute(release threshold)");
    }
    pool_ = pool;
  });
  // call_once rethrows a failure and tries again on the next call.
  return pool_;
}

std::shared_ptr<Context> open_context(int ordinal) {
  const cu::Driver& d = cu::driver();
  int count = 0;
  cu::check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count)
    throw Error(ErrorKind::usage, "device " + std::to_string(ordinal) + " does not exist; this machine has " +
                                      std::to_string(count) + " CUDA device(s), numbered from 0");
  auto c = std::make_shared<Context>();
  cu::check(d.cuDeviceGet(&c->device, ordinal), "cuDeviceGet");
  cu::CUcontext current = nullptr;
  cu::check(d.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  cu::CUdevice current_dev = -1;
  if (current && d.cuCtxGetDevice(&current_dev) == cu::CUDA_SUCCESS && current_dev == c->device) {
    c->ctx = current;  // the caller's context: used, never destroyed
    log::debug("using the caller's current CUDA context on device " + std::to_string(ordinal));
  } else {
    cu::check(d.cuDevicePrimaryCtxRetain(&c->ctx, c->device), "cuDevicePrimaryCtxRetain");
    c->owns_primary = true;
  }
  c->info = query(c->device, ordinal);
  return c;
}

namespace {

std::string pointer_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// "context 0x… (device N)"; the device is read by making the context current for a moment.
std::string context_text(cu::CUcontext ctx) {
  const cu::Driver& d = cu::driver();
  std::string s = "context " + pointer_text(ctx);
  cu::CUdevice dev = -1;
  cu::CUcontext popped = nullptr;
  if (d.cuCtxPushCurrent(ctx) == cu::CUDA_SUCCESS) {
    if (d.cuCtxGetDevice(&dev) == cu::CUDA_SUCCESS) s += " (device " + std::to_string(dev) + ")";
    d.cuCtxPopCurrent(&popped);
  }
  return s;
}

}  // namespace

void check_stream(const Context& c, void* stream, const char* call) {
  if (!stream) return;
  const cu::Driver& d = cu::driver();
  cu::CUcontext owner = nullptr;
  const cu::CUresult r = d.cuStreamGetCtx(static_cast<cu::CUstream>(stream), &owner);
  const std::string name = std::string(call) + ": stream " + pointer_text(stream);
  // The driver answers for every live stream: any failure (CUDA_ERROR_INVALID_HANDLE,
  // CONTEXT_IS_DESTROYED, ...) means the handle is not one.
  if (r != cu::CUDA_SUCCESS)
    throw Error(ErrorKind::usage, name + " is not a live CUDA stream (destroyed, or its context destroyed): the driver says " +
                                      cu::error_name(r) + "; pass a stream that exists, or NULL for the default stream");
  if (owner != c.ctx)
    throw Error(ErrorKind::usage,
                name + " belongs to CUDA " + context_text(owner) + ", not to this runtime's " + context_text(c.ctx) +
                    "; a kernel runs only on streams of its runtime's context: the context that was current when "
                    "Runtime::create ran (on that device), else the device's primary context, which the CUDA "
                    "runtime API (and PyTorch) use");
}

void check_launch(cu::CUresult r, const char* what, void* stream) {
  if (r == cu::CUDA_ERROR_INVALID_HANDLE && stream)
    throw Error(ErrorKind::usage, std::string(what) + " failed on stream " + pointer_text(stream) + ": " +
                                      cu::error_name(r) + "; the stream is destroyed or not a stream of this "
                                      "runtime's context");
  cu::check(r, what);
}

ContextGuard::ContextGuard(const Context& c) { cu::check(cu::driver().cuCtxPushCurrent(c.ctx), "cuCtxPushCurrent"); }

ContextGuard::~ContextGuard() {
  cu::CUcontext popped = nullptr;
  cu::driver().cuCtxPopCurrent(&popped);
}

}  // namespace flashjit::rt

namespace flashjit {

std::string DeviceInfo::arch() const {
  if (cc_major == 9 && cc_minor == 0) return "sm_90a";
  if (cc_major == 8) return "sm_8" + std::to_string(cc_minor);
  if (cc_major > 9 || (cc_major == 9 && cc_minor > 0)) return "sm_90";  // PTX for sm_90 is forward-compatible
  return "";
}

}  // namespace flashjit

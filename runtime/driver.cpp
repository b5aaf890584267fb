#include "runtime/driver.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

#include "flashjit/flashjit.hpp"

namespace flashjit::cu {

namespace {

// Loads once; a failure is remembered and rethrown, so every caller sees the same message.
struct Loaded {
  Driver api;
  std::string failure;  // empty when usable
};

Loaded load() {
  Loaded out;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    out.failure = std::string("no CUDA driver: cannot load libcuda.so.1 (") + (why ? why : "unknown reason") +
                  "); flashjit can compile kernels here but needs an NVIDIA driver to run them";
    return out;
  }
  // Handles from dlopen are never closed: the driver must outlive every module and context.
#define FLASHJIT_CUDA_LOAD(name, symbol, params)                                                 \
  out.api.name = reinterpret_cast<decltype(out.api.name)>(dlsym(lib, symbol));                   \
  if (!out.api.name) {                                                                           \
    out.failure = std::string("the CUDA driver in libcuda.so.1 lacks ") + symbol +               \
                  "; flashjit needs a driver for CUDA 12.0 or newer";                            \
    return out;                                                                                  \
  }
  FLASHJIT_CUDA_API(FLASHJIT_CUDA_LOAD)
#undef FLASHJIT_CUDA_LOAD
  CUresult r = out.api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    out.api.cuGetErrorName(r, &name);
    out.failure = std::string("the CUDA driver failed to initialise: ") + (name ? name : "unknown error") +
                  (r == CUDA_ERROR_NO_DEVICE ? " (no CUDA-capable device is visible)" : "");
    return out;
  }
  int count = 0;
  if (out.api.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0)
    out.failure = "the CUDA driver is loaded but reports no device";
  return out;
}

}  // namespace

const Driver& driver() {
  static const Loaded loaded = load();
  if (!loaded.failure.empty()) throw Error(ErrorKind::no_gpu, loaded.failure);
  return loaded.api;
}

namespace {

// Names (and cuda.h's descriptions) of the codes flashjit reports specially, for messages made
// without a loaded driver (and the unit tests, which run without one).
const char* table_name(CUresult r, const char** text) {
  struct Row {
    CUresult code;
    const char* name;
    const char* text;
  };
  static const Row rows[] = {
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
      {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
      {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
      {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
      {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
      {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
      {CUDA_ERROR_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
      {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
      {CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain"},
      {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
      {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
      {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
      {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
      {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
  };
  for (const Row& row : rows)
    if (row.code == r) {
      *text = row.text;
      return row.name;
    }
  return nullptr;
}

std::string gib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(1ull << 30));
  return buf;
}

}  // namespace

ErrorKind kind_of(CUresult r) { return r == CUDA_ERROR_OUT_OF_MEMORY ? ErrorKind::out_of_memory : ErrorKind::cuda; }

std::string error_name(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  try {
    const Driver& d = driver();
    d.cuGetErrorName(r, &name);
    d.cuGetErrorString(r, &text);
  } catch (const Error&) {
    // No driver: the table's name (a message about a failure must not fail itself).
  }
  if (!name) name = table_name(r, &text);
  return std::string(name ? name : "CUDA_ERROR_" + std::to_string(r)) + " (" + (text ? text : "no description") + ")";
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  throw Error(kind_of(r), std::string(what) + " failed: " + error_name(r));
}

void check_alloc(CUresult r, const char* what, size_t bytes) {
  if (r == CUDA_SUCCESS) return;
  if (r != CUDA_ERROR_OUT_OF_MEMORY) check(r, what);
  std::string message = "out of device memory: " + std::string(what) + " of " + std::to_string(bytes) + " bytes (" +
                        gib(bytes) + ") failed: " + error_name(r);
  size_t free = 0, total = 0;
  try {
    if (driver().cuMemGetInfo(&free, &total) == CUDA_SUCCESS) message += "; " + gib(free) + " of " + gib(total) + " free";
  } catch (const Error&) {
  }
  throw Error(ErrorKind::out_of_memory, message);
}

}  // namespace flashjit::cu

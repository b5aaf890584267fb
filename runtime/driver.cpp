#include "runtime/driver.hpp"

#include <dlfcn.h>

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

std::string error_name(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  const Driver& d = driver();
  d.cuGetErrorName(r, &name);
  d.cuGetErrorString(r, &text);
  return std::string(name ? name : "CUDA_ERROR_" + std::to_string(r)) + " (" + (text ? text : "no description") + ")";
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  throw Error(ErrorKind::cuda, std::string(what) + " failed: " + error_name(r));
}

}  // namespace flashjit::cu

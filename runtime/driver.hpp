// The CUDA driver, loaded at run time with dlopen("libcuda.so.1") from ONE X-macro list, so
// flashjit builds and runs (compile-only) on machines without a GPU.
#pragma once

#include <string>

#include "flashjit/flashjit.hpp"
#include "runtime/cuda_types.hpp"

namespace flashjit::cu {

// X(name, symbol, (parameter types)) — symbol is the versioned export cuda.h's macros map to.
#define FLASHJIT_CUDA_API(X)                                                                         \
  X(cuInit, "cuInit", (unsigned))                                                                    \
  X(cuDriverGetVersion, "cuDriverGetVersion", (int*))                                                \
  X(cuGetErrorName, "cuGetErrorName", (CUresult, const char**))                                      \
  X(cuGetErrorString, "cuGetErrorString", (CUresult, const char**))                                  \
  X(cuDeviceGetCount, "cuDeviceGetCount", (int*))                                                    \
  X(cuDeviceGet, "cuDeviceGet", (CUdevice*, int))                                                    \
  X(cuDeviceGetName, "cuDeviceGetName", (char*, int, CUdevice))                                      \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", (int*, int, CUdevice))                             \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext*, CUdevice))                    \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice))                           \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", (CUcontext*))                                                \
  X(cuCtxGetDevice, "cuCtxGetDevice", (CUdevice*))                                                   \
  X(cuCtxPushCurrent, "cuCtxPushCurrent_v2", (CUcontext))                                            \
  X(cuCtxPopCurrent, "cuCtxPopCurrent_v2", (CUcontext*))                                             \
  X(cuCtxSynchronize, "cuCtxSynchronize", ())                                                        \
  X(cuLinkCreate, "cuLinkCreate_v2", (unsigned, int*, void**, CUlinkState*))                         \
  X(cuLinkAddData, "cuLinkAddData_v2",                                                               \
    (CUlinkState, int, void*, size_t, const char*, unsigned, int*, void**))                          \
  X(cuLinkComplete, "cuLinkComplete", (CUlinkState, void**, size_t*))                                \
  X(cuLinkDestroy, "cuLinkDestroy", (CUlinkState))                                                   \
  X(cuModuleLoadData, "cuModuleLoadData", (CUmodule*, const void*))                                  \
  X(cuModuleUnload, "cuModuleUnload", (CUmodule))                                                    \
  X(cuModuleGetFunction, "cuModuleGetFunction", (CUfunction*, CUmodule, const char*))                \
  X(cuFuncGetAttribute, "cuFuncGetAttribute", (int*, int, CUfunction))                               \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor",      \
    (int*, CUfunction, int, size_t))                                                                 \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", (CUfunction, int, int))                                \
  X(cuLaunchKernel, "cuLaunchKernel",                                                                \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,     \
     void**, void**))                                                                                \
  X(cuLaunchKernelEx, "cuLaunchKernelEx", (const CUlaunchConfig*, CUfunction, void**, void**))        \
  X(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled",                                               \
    (CUtensorMap*, int, unsigned, void*, const unsigned long long*, const unsigned long long*,       \
     const unsigned*, const unsigned*, int, int, int, int))                                          \
  X(cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr*, size_t))                                             \
  X(cuMemFree, "cuMemFree_v2", (CUdeviceptr))                                                        \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", (CUdeviceptr, const void*, size_t))                             \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", (void*, CUdeviceptr, size_t))                                   \
  X(cuMemsetD8, "cuMemsetD8_v2", (CUdeviceptr, unsigned char, size_t))                               \
  X(cuMemsetD32Async, "cuMemsetD32Async", (CUdeviceptr, unsigned, size_t, CUstream))                \
  X(cuMemAllocAsync, "cuMemAllocAsync", (CUdeviceptr*, size_t, CUstream))                            \
  X(cuMemFreeAsync, "cuMemFreeAsync", (CUdeviceptr, CUstream))                                       \
  X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", (CUdeviceptr*, size_t, CUmemoryPool, CUstream)) \
  X(cuMemPoolCreate, "cuMemPoolCreate", (CUmemoryPool*, const CUmemPoolProps*))                      \
  X(cuMemPoolDestroy, "cuMemPoolDestroy", (CUmemoryPool))                                            \
  X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", (CUmemoryPool, int, void*))                      \
  X(cuMemGetInfo, "cuMemGetInfo_v2", (size_t*, size_t*))                                            \
  X(cuStreamSynchronize, "cuStreamSynchronize", (CUstream))                                          \
  X(cuStreamGetCtx, "cuStreamGetCtx", (CUstream, CUcontext*))                                        \
  X(cuStreamIsCapturing, "cuStreamIsCapturing", (CUstream, int*))                                    \
  X(cuEventCreate, "cuEventCreate", (CUevent*, unsigned))                                            \
  X(cuEventRecord, "cuEventRecord", (CUevent, CUstream))                                             \
  X(cuEventSynchronize, "cuEventSynchronize", (CUevent))                                             \
  X(cuEventElapsedTime, "cuEventElapsedTime", (float*, CUevent, CUevent))                            \
  X(cuEventDestroy, "cuEventDestroy_v2", (CUevent))

struct Driver {
#define FLASHJIT_CUDA_FIELD(name, symbol, params) CUresult(*name) params = nullptr;
  FLASHJIT_CUDA_API(FLASHJIT_CUDA_FIELD)
#undef FLASHJIT_CUDA_FIELD
};

// The loaded and initialised driver; throws Error(no_gpu) naming what is missing
// (libcuda.so.1 not found, a symbol missing, cuInit failed, or no device).
const Driver& driver();

// The ErrorKind a failed driver call is: out_of_memory for CUDA_ERROR_OUT_OF_MEMORY (the one
// failure a caller can act on: free memory, use smaller shapes), cuda for the rest.
ErrorKind kind_of(CUresult r);

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)": the driver's name and description, or, without a
// loaded driver, the name from flashjit's table of the codes it maps ("CUDA_ERROR_<n>" otherwise).
std::string error_name(CUresult r);

// Throws Error(kind_of(r)) "<what> failed: <CUDA_ERROR_NAME> (<description>)" when r is not
// CUDA_SUCCESS.
void check(CUresult r, const char* what);

// check() for an allocation: out of memory says "out of device memory", the bytes asked for and
// what the device has free, e.g. "out of device memory: cuMemAllocAsync(backward workspace) of
// 274877906944 bytes (256 GiB) failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory); 139.1 GiB of
// 139.8 GiB free".
void check_alloc(CUresult r, const char* what, size_t bytes);

}  // namespace flashjit::cu

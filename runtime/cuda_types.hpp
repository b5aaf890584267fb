// The few CUDA Driver API types and constants flashjit uses, declared here so that nothing needs
// cuda.h at build time (values from the CUDA 12/13 cuda.h; they are part of the stable ABI).
#pragma once

#include <cstddef>
#include <cstdint>

namespace flashjit::cu {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUlinkState = struct CUlinkState_st*;
using CUmemoryPool = struct CUmemPoolHandle_st*;

// CUmemPoolProps (cuda.h, CUDA 11.2+; 88 bytes in every version since, later fields carved out of
// `reserved`, zero meaning their default).
struct CUmemPoolProps {
  int allocType;      // CUmemAllocationType: CU_MEM_ALLOCATION_TYPE_PINNED = 1
  int handleTypes;    // CUmemAllocationHandleType: 0, none
  int locationType;   // CUmemLocation.type: CU_MEM_LOCATION_TYPE_DEVICE = 1
  int locationId;     // CUmemLocation.id: the device ordinal
  void* win32SecurityAttributes;
  unsigned char reserved[64];
};
static_assert(sizeof(CUmemPoolProps) == 88, "CUmemPoolProps must match cuda.h's layout");
constexpr int CU_MEM_ALLOCATION_TYPE_PINNED = 1;
constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 1;
constexpr int CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4;

// CUlaunchAttribute and CUlaunchConfig (cuda.h, CUDA 12.0+) for cuLaunchKernelEx: an attribute is
// its id, padding to 8 bytes and a 64-byte value union, of which flashjit sets the first int.
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmaticStreamSerializationAllowed;
  } value;
};
static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute must match cuda.h's layout");
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned numAttrs;
};
static_assert(sizeof(CUlaunchConfig) == 56, "CUlaunchConfig must match cuda.h's layout");
constexpr int CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;

// CUtensorMap (cuda.h, CUDA 12.0+): an opaque 128-byte, 64-byte-aligned tensor description for
// the TMA unit, written by cuTensorMapEncodeTiled. Its enums' values as cuda.h numbers them.
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};
static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap must match cuda.h's layout");
constexpr int CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6;
constexpr int CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9;
constexpr int CU_TENSOR_MAP_INTERLEAVE_NONE = 0;
constexpr int CU_TENSOR_MAP_SWIZZLE_128B = 3;
constexpr int CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3;
constexpr int CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0;  // out-of-bounds elements read as zeros

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
constexpr CUresult CUDA_ERROR_INVALID_IMAGE = 200;
constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
constexpr CUresult CUDA_ERROR_INVALID_PTX = 218;
constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;
constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
constexpr CUresult CUDA_ERROR_ILLEGAL_ADDRESS = 700;
constexpr CUresult CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701;
constexpr CUresult CUDA_ERROR_CONTEXT_IS_DESTROYED = 709;

constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8;
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

constexpr int CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

constexpr int CU_JIT_INFO_LOG_BUFFER = 3;
constexpr int CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
constexpr int CU_JIT_OPTIMIZATION_LEVEL = 7;
constexpr int CU_JIT_LOG_VERBOSE = 12;
constexpr int CU_JIT_INPUT_PTX = 1;

constexpr unsigned CU_EVENT_DEFAULT = 0;

}  // namespace flashjit::cu

// CUDA driver failures as flashjit errors (runtime/driver.hpp), on the CPU: out of device memory is
// ErrorKind::out_of_memory and names the allocation and its bytes; other failures are
// ErrorKind::cuda naming the call and the driver's error; the names come from flashjit's own table
// when no driver is loaded, so a message about a failure never fails itself.
#include <catch2/catch.hpp>

#include "runtime/driver.hpp"

using namespace flashjit;

namespace {

Error thrown(void (*fn)()) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  FAIL("nothing was thrown");
  return Error(ErrorKind::internal, "unreachable");
}

}  // namespace

TEST_CASE("driver errors: CUresult codes map to error kinds and named messages", "[runtime][faults]") {
  CHECK(cu::kind_of(cu::CUDA_ERROR_OUT_OF_MEMORY) == ErrorKind::out_of_memory);
  for (cu::CUresult r : {cu::CUDA_ERROR_INVALID_VALUE, cu::CUDA_ERROR_INVALID_HANDLE, cu::CUDA_ERROR_INVALID_PTX,
                         cu::CUDA_ERROR_ILLEGAL_ADDRESS, cu::CUDA_ERROR_CONTEXT_IS_DESTROYED})
    CHECK(cu::kind_of(r) == ErrorKind::cuda);
  CHECK_THAT(cu::error_name(cu::CUDA_ERROR_OUT_OF_MEMORY),
             Catch::StartsWith("CUDA_ERROR_OUT_OF_MEMORY (out of memory"));
  CHECK_THAT(cu::error_name(cu::CUDA_ERROR_INVALID_HANDLE), Catch::StartsWith("CUDA_ERROR_INVALID_HANDLE ("));
  CHECK_THAT(cu::error_name(cu::CUDA_ERROR_INVALID_PTX), Catch::StartsWith("CUDA_ERROR_INVALID_PTX ("));
  CHECK(cu::error_name(123456) == "CUDA_ERROR_123456 (no description)");

  const Error oom = thrown([] { cu::check(cu::CUDA_ERROR_OUT_OF_MEMORY, "cuModuleLoadData"); });
  CHECK(oom.kind() == ErrorKind::out_of_memory);
  CHECK_THAT(oom.what(), Catch::StartsWith("cuModuleLoadData failed: CUDA_ERROR_OUT_OF_MEMORY"));
  const Error handle = thrown([] { cu::check(cu::CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernel"); });
  CHECK(handle.kind() == ErrorKind::cuda);
  CHECK_THAT(handle.what(), Catch::StartsWith("cuLaunchKernel failed: CUDA_ERROR_INVALID_HANDLE"));
  CHECK_NOTHROW(cu::check(cu::CUDA_SUCCESS, "cuInit"));
}

TEST_CASE("driver errors: an allocation out of device memory names what was allocated and its bytes",
          "[runtime][faults]") {
  const Error e = thrown(
      [] { cu::check_alloc(cu::CUDA_ERROR_OUT_OF_MEMORY, "cuMemAllocAsync(backward workspace)", size_t(3) << 30); });
  CHECK(e.kind() == ErrorKind::out_of_memory);
  CHECK_THAT(e.what(), Catch::StartsWith("out of device memory: cuMemAllocAsync(backward workspace) of 3221225472 "
                                         "bytes (3.0 GiB) failed: CUDA_ERROR_OUT_OF_MEMORY"));
  // Another failure of an allocation is not called out of memory.
  const Error other = thrown([] { cu::check_alloc(cu::CUDA_ERROR_INVALID_VALUE, "cuMemAlloc", 16); });
  CHECK(other.kind() == ErrorKind::cuda);
  CHECK_THAT(other.what(), Catch::StartsWith("cuMemAlloc failed: CUDA_ERROR_INVALID_VALUE"));
  CHECK_NOTHROW(cu::check_alloc(cu::CUDA_SUCCESS, "cuMemAlloc", 16));
}

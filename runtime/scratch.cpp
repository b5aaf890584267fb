#include "runtime/scratch.hpp"

#include <algorithm>
#include <string>

#include "runtime/dispatch.hpp"

namespace flashjit::rt {

StreamScratch::~StreamScratch() {
  const cu::Driver& d = cu::driver();
  for (cu::CUdeviceptr p : ptrs_) d.cuMemFreeAsync(p, stream_);
}

cu::CUdeviceptr StreamScratch::alloc(size_t bytes, const char* what) {
  bytes = std::max<size_t>(bytes, 4);
  cu::CUdeviceptr p = 0;
  ptrs_.reserve(ptrs_.size() + 1);  // so that push_back cannot throw with `p` allocated
  const cu::Driver& d = cu::driver();
  if (!pool_ && !capturing_) {
    capturing_ = stream_capturing(ctx_, stream_);
    if (!capturing_) pool_ = ctx_.scratch_pool();
  }
  if (pool_)
    cu::check_alloc(d.cuMemAllocFromPoolAsync(&p, bytes, pool_, stream_),
                    ("cuMemAllocFromPoolAsync(" + std::string(what) + ")").c_str(), bytes);
  else
    cu::check_alloc(d.cuMemAllocAsync(&p, bytes, stream_), ("cuMemAllocAsync(" + std::string(what) + ")").c_str(), bytes);
  ptrs_.push_back(p);
  return p;
}

void StreamScratch::free() {
  const cu::Driver& d = cu::driver();
  std::vector<cu::CUdeviceptr> ptrs;
  ptrs.swap(ptrs_);
  cu::CUresult first = cu::CUDA_SUCCESS;
  for (cu::CUdeviceptr p : ptrs)
    if (cu::CUresult r = d.cuMemFreeAsync(p, stream_); first == cu::CUDA_SUCCESS) first = r;
  cu::check(first, "cuMemFreeAsync(launch scratch)");
}

}  // namespace flashjit::rt

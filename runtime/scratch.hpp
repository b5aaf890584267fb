// Stream-ordered scratch memory for one launch (workspaces, block maps): allocated from the
// context's scratch pool (cuMemAllocFromPoolAsync) on the caller's stream — or with
// cuMemAllocAsync while the stream captures a CUDA graph, whose memory nodes own their memory —
// and freed with cuMemFreeAsync after the kernels that use it.
// A failure part way (out of memory for the second buffer, a launch the driver refuses) still frees
// what was allocated, so a failed call leaks nothing and the next one finds the memory free.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/context.hpp"

namespace flashjit::rt {

class StreamScratch {
 public:
  StreamScratch(const Context& ctx, cu::CUstream stream) : ctx_(ctx), stream_(stream) {}
  ~StreamScratch();  // frees what free() did not (an exception left the launch); never throws
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;

  // `bytes` (at least 4) on the stream; Error(out_of_memory) naming the call, `what` and the bytes.
  cu::CUdeviceptr alloc(size_t bytes, const char* what);
  // Frees everything, stream-ordered after the work enqueued so far; errors throw.
  void free();

 private:
  const Context& ctx_;
  cu::CUstream stream_;
  bool capturing_ = false;           // decided at the first alloc: most launches allocate nothing
  cu::CUmemoryPool pool_ = nullptr;  // the context's pool, unless capturing
  std::vector<cu::CUdeviceptr> ptrs_;
};

}  // namespace flashjit::rt

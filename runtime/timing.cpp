#include "runtime/timing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace flashjit::rt {

EventTimer::EventTimer(const Context& ctx) : ctx_(ctx) {
  ContextGuard guard(ctx_);
  const cu::Driver& d = cu::driver();
  cu::check(d.cuEventCreate(&start_, cu::CU_EVENT_DEFAULT), "cuEventCreate");
  if (cu::CUresult r = d.cuEventCreate(&stop_, cu::CU_EVENT_DEFAULT); r != cu::CUDA_SUCCESS) {
    d.cuEventDestroy(start_);
    cu::check(r, "cuEventCreate");
  }
}

EventTimer::~EventTimer() {
  // Destructors never throw: a failure here only leaks two events.
  const cu::Driver& d = cu::driver();
  cu::CUcontext popped = nullptr;
  if (d.cuCtxPushCurrent(ctx_.ctx) != cu::CUDA_SUCCESS) return;
  d.cuEventDestroy(start_);
  d.cuEventDestroy(stop_);
  d.cuCtxPopCurrent(&popped);
}

float EventTimer::time(cu::CUstream stream, const std::function<void()>& launch) {
  ContextGuard guard(ctx_);
  const cu::Driver& d = cu::driver();
  cu::check(d.cuEventRecord(start_, stream), "cuEventRecord");
  launch();
  cu::check(d.cuEventRecord(stop_, stream), "cuEventRecord");
  cu::check(d.cuEventSynchronize(stop_), "cuEventSynchronize (a launch failed)");
  float ms = 0;
  cu::check(d.cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime");
  return ms;
}

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms);
  return buf;
}

double quantile(const std::vector<float>& sorted, double p) {
  const size_t i = static_cast<size_t>(std::lround(p * double(sorted.size() - 1)));
  return sorted[std::min(i, sorted.size() - 1)];
}

double median_ms(const Context& ctx, cu::CUstream stream, int warmup, int reps, const std::function<void()>& launch) {
  for (int i = 0; i < warmup; ++i) launch();
  EventTimer timer(ctx);
  std::vector<float> ms;
  for (int i = 0; i < std::max(reps, 1); ++i) ms.push_back(timer.time(stream, launch));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace flashjit::rt

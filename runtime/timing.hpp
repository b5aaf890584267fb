// Launch timing with CUDA events (CUDA C Best Practices Guide, "Using CUDA GPU Timers"): a pair of
// events around one launch on its stream, read after the stop event completes.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/context.hpp"

namespace flashjit::rt {

class EventTimer {
 public:
  explicit EventTimer(const Context& ctx);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  // Milliseconds between events recorded on `stream` before and after `launch()`; waits for it.
  float time(cu::CUstream stream, const std::function<void()>& launch);

 private:
  const Context& ctx_;
  cu::CUevent start_ = nullptr, stop_ = nullptr;
};

// "1.234": milliseconds as the tuner's reports and log lines print them.
std::string format_ms(double ms);

// The value at quantile p (0..1) of sorted samples.
double quantile(const std::vector<float>& sorted, double p);

// Median milliseconds of `reps` (at least 1) timed calls of `launch` after `warmup` untimed ones.
double median_ms(const Context& ctx, cu::CUstream stream, int warmup, int reps, const std::function<void()>& launch);

}  // namespace flashjit::rt

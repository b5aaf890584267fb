// The autotuner's benches for one tuning job, the forward's here and the backward's in
// runtime/tune_bench_backward.cpp: inputs (several sets that together exceed the L2), an L2 flush,
// each candidate config compiled and loaded, its output checked against the first measured
// config's, and its launches timed with CUDA events.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autotune/search.hpp"
#include "runtime/tuner.hpp"

namespace flashjit::rt {

class EventTimer;

// What the search asks of a bench (autotune::SearchCallbacks).
class CandidateBench {
 public:
  virtual ~CandidateBench() = default;
  // The resource model: the plan's limits, shared memory, then registers/spills from the driver.
  virtual std::optional<std::string> prune(const TileConfig& c) = 0;
  // A hash of the config's binary (kernel names blanked): configs with equal code are timed once.
  virtual std::string fingerprint(const TileConfig& c) = 0;
  // Warm-up, output check, then timed launches with an L2 flush before each.
  virtual autotune::Measurement measure(const TileConfig& c) = 0;
};

// The backward's bench (runtime/tune_bench_backward.cpp).
std::unique_ptr<CandidateBench> make_backward_bench(const Runtime& runtime, std::shared_ptr<Context> ctx,
                                                    const TuneJob& job);

// ---- pieces both benches use ----
// A few spilled registers stay in L1 and can cost less than what the config gains: on the H200,
// bm128_bn64_w4_s2 at d=128 spills 24 B and runs 8% faster than any spill-free config
// (docs/perf-notes.md §4). Larger spills are pruned untimed; small ones are measured.
constexpr int kMaxTunedSpillBytes = 64;
// Why a loaded kernel is pruned (spills, registers per SM), or nullopt.
std::optional<std::string> prune_loaded(int registers, int spill_bytes, int threads, const char* what);
// Enough input sets of `set_bytes` that one round over them exceeds the L2 (each launch then
// starts cold even without the flush): at least 2, at most 32 and 8 GiB.
size_t input_set_count(size_t set_bytes, const DeviceInfo& info);
// Uniform values of N(0,1)'s variance in `dtype`, from `seed` (enough for timing and checks).
std::vector<uint16_t> random_halves(size_t n, DType dtype, uint64_t seed);
// The spec's tensors: the job's, else random contents of the declared shapes (kept in `keep`).
std::vector<BufferArg> job_tensors(const Runtime& runtime, const TuneJob& job, std::vector<DeviceBuffer>& keep);
// A buffer twice the L2 (at least 8 MiB), written before each timed launch to evict the inputs.
DeviceBuffer alloc_l2_flush(const Runtime& runtime, const DeviceInfo& info);
// `reps` timings of `launch(r)`, the L2 evicted before each; median, p20, p80.
autotune::Measurement time_candidate(const TuneJob& job, EventTimer& timer, DeviceBuffer& flush,
                                     const std::function<void(int)>& launch);

class TuneBench final : public CandidateBench {
 public:
  TuneBench(const Runtime& runtime, std::shared_ptr<Context> ctx, const TuneJob& job);
  ~TuneBench() override;
  TuneBench(const TuneBench&) = delete;
  TuneBench& operator=(const TuneBench&) = delete;

  std::optional<std::string> prune(const TileConfig& c) override;
  std::string fingerprint(const TileConfig& c) override;
  autotune::Measurement measure(const TileConfig& c) override;

 private:
  struct Built {
    std::optional<Kernel> kernel;
    std::string error;
  };
  const Kernel* kernel(const TileConfig& c, std::string* why);
  std::optional<std::string> check_output(const TileConfig& c);
  void setup();

  const Runtime& runtime_;
  std::shared_ptr<Context> ctx_;
  const TuneJob& job_;
  std::map<std::string, Built> kernels_;
  std::vector<DeviceBuffer> buffers_;  // q, k, v, o, lse of each input set in turn, then the spec's tensors
  size_t out_elems_ = 0;
  std::vector<uint16_t> baseline_;     // set 0's output from the first config measured
  std::string baseline_name_;
  std::vector<ForwardArgs> sets_;
  DeviceBuffer flush_;
  std::unique_ptr<EventTimer> timer_;
};

}  // namespace flashjit::rt

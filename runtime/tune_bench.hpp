// The autotuner's benches for one tuning job, the forward's here and the backward's in
// runtime/tune_bench_backward.cpp: inputs (several sets that together exceed the L2), an L2 flush,
// each candidate config compiled and loaded, its output (poisoned before it runs) checked (the
// forward's against the fp64 reference under the tests' rule, the backward's against the first
// measured config's), and its launches timed with CUDA events.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autotune/search.hpp"
#include "flashjit/reference.hpp"
#include "runtime/tuner.hpp"

namespace flashjit::rt {

class EventTimer;

// What the search asks of a bench (autotune::SearchCallbacks), and the measurement protocol both
// benches follow; each supplies its kernels, inputs, launch and output check.
class CandidateBench {
 public:
  CandidateBench(std::shared_ptr<Context> ctx, const TuneJob& job);
  virtual ~CandidateBench();
  CandidateBench(const CandidateBench&) = delete;
  CandidateBench& operator=(const CandidateBench&) = delete;
  // The resource model: the plan's limits, shared memory, then registers/spills from the driver.
  virtual std::optional<std::string> prune(const TileConfig& c) = 0;
  // A hash of the config's binary (kernel names blanked): configs with equal code are timed once.
  virtual std::string fingerprint(const TileConfig& c) = 0;
  // Inputs (once), output poisoned, three warm-up launches (input set 0 first, so that its output
  // is this config's; a launch error shows here), the output check, then timed launches with an
  // L2 flush before each: median, p20, p80. Failures are data, never raised.
  autotune::Measurement measure(const TileConfig& c);

 protected:
  // Makes `c` the config launch() runs; its compile error, or nullopt.
  virtual std::optional<std::string> load(const TileConfig& c) = 0;
  virtual void setup() = 0;   // the input sets, once
  virtual void poison() = 0;  // set 0's outputs filled with NaN
  virtual void launch(int r) = 0;  // on input set r (mod the number of sets)
  // Set 0's output against the first measured config's: why it is wrong, or nullopt.
  virtual std::optional<std::string> check(const TileConfig& c) = 0;

  std::shared_ptr<Context> ctx_;
  const TuneJob& job_;
  DeviceBuffer flush_;  // at least twice the L2, written before each timed launch (setup() allocates)

 private:
  std::unique_ptr<EventTimer> timer_;
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
// Elements of each tensor of one input set (BSHD, contiguous), and the LSE's.
struct TensorSizes {
  size_t q = 0, k = 0, v = 0, o = 0, lse = 0;
  static TensorSizes of(const TuneJob& job);
};
// A paged K/V cache for tuning (TuneJob::page_size): a block table of every sequence's pages in a
// fixed shuffled order, as a serving allocator hands pages out, and the pools in that layout.
struct PagedLayout {
  int page_size = 0;
  int64_t per_seq = 0;         // pages a sequence of seq_kv keys takes (max_pages_per_seq)
  std::vector<int32_t> table;  // [batch, per_seq]
  static PagedLayout of(const ProblemShape& s, int page_size);
  // The page pool [batch · per_seq, page_size, heads_kv, dim] of `rows` ([batch, seq_kv, heads_kv,
  // dim]); rows of a last page past seq_kv are zeros.
  std::vector<uint16_t> pool(const std::vector<uint16_t>& rows, const ProblemShape& s, int64_t dim) const;
};
// Enough input sets of `set_bytes` that one round over them exceeds the L2 (each launch then
// starts cold even without the flush): at least 2, at most 32 and 8 GiB.
size_t input_set_count(size_t set_bytes, const DeviceInfo& info);
// Uniform values of N(0,1)'s variance in `dtype`, from `seed` (enough for timing and checks).
std::vector<uint16_t> random_halves(size_t n, DType dtype, uint64_t seed);
// The spec's tensors: the job's, else random contents of the declared shapes (kept in `keep`).
std::vector<BufferArg> job_tensors(const Runtime& runtime, const TuneJob& job, std::vector<DeviceBuffer>& keep);
// A buffer twice the L2 (at least 8 MiB), written before each timed launch to evict the inputs.
DeviceBuffer alloc_l2_flush(const Runtime& runtime, const DeviceInfo& info);

class TuneBench final : public CandidateBench {
 public:
  TuneBench(const Runtime& runtime, std::shared_ptr<Context> ctx, const TuneJob& job);

  std::optional<std::string> prune(const TileConfig& c) override;
  std::string fingerprint(const TileConfig& c) override;
  // ForwardArgs::num_splits of the timed launches from now on (0: automatic, the default).
  void force_splits(int n) { splits_ = n; }

 private:
  struct Built {
    std::optional<Kernel> kernel;
    std::string error;
  };
  const Kernel* kernel(const TileConfig& c, std::string* why);
  std::optional<std::string> load(const TileConfig& c) override;
  void setup() override;
  void poison() override;
  void launch(int r) override;
  std::optional<std::string> check(const TileConfig& c) override;
  void host_problem();  // problem_ and expected_: the host inputs and their fp64 reference

  const Runtime& runtime_;
  std::map<std::string, Built> kernels_;
  const Kernel* current_ = nullptr;    // load()'s
  std::vector<DeviceBuffer> buffers_;  // q, k, v, o, lse of each input set in turn, then the spec's tensors
  ref::Problem problem_;               // set 0 on the host: what every config's output is judged by
  ref::Expected expected_;             // the fp64 reference of problem_'s checked rows
  std::vector<ForwardArgs> sets_;
  int splits_ = 0;
};

}  // namespace flashjit::rt

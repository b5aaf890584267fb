// The autotuner on a device (issue 5, DESIGN §6) and the per-shape-bucket kernel choice that
// Kernel::forward makes with it: tuning cache lookup (memoised per process) → tune on first use
// (FLASHJIT_AUTOTUNE=quick|full) → the chosen config compiled through the compile cache and loaded.
// The search itself (enumerate, prune, select, rank) is autotune/search.hpp; this file supplies its
// callbacks: the resource model, the binary fingerprint and the CUDA-event timing.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "autotune/search.hpp"
#include "autotune/tuning_key.hpp"
#include "flashjit/flashjit.hpp"
#include "runtime/context.hpp"
#include "runtime/kernel_cache.hpp"

namespace flashjit::rt {

// FLASHJIT_AUTOTUNE, or `value` when given ("off" | "quick" | "full"; Error(usage) otherwise).
FLASHJIT_API autotune::TuneMode tune_mode(const std::optional<std::string>& value = std::nullopt);

// The spec part of a tuning key: 16 hex digits of SHA-256 of the canonical spec, name cleared.
FLASHJIT_API std::string tuning_spec_hash(const AttentionSpec& spec);
FLASHJIT_API autotune::TuningKey tuning_key(const AttentionSpec& spec, int64_t batch, int64_t heads_q, int64_t seq_q,
                                            int64_t seq_kv);

// The search space: the spec's `tune` section where it gives a list, the head dim's defaults for
// the rest; always with the template's structural rule (block_m = 16 or 32 × num_warps).
FLASHJIT_API autotune::SearchSpace search_space_for(const AttentionSpec& spec);

// A stored tuning for (device, spec, shape bucket): the tuning cache, memoised per process (a
// miss is remembered too, until this process stores one).
FLASHJIT_API std::optional<autotune::TuningEntry> lookup_tuning(const DeviceInfo& device, const AttentionSpec& spec,
                                                                const autotune::TuningKey& key);

// One shape to tune.
struct TuneJob {
  AttentionSpec spec;
  int64_t batch = 1, heads_q = 1, heads_kv = 1, seq_q = 0, seq_kv = 0;
  autotune::TuneMode mode = autotune::TuneMode::quick;
  std::optional<double> deadline_s;
  std::ostream* progress = nullptr;     // `[i/N] ...` lines and the summary table (e.g. &std::cerr)
  // What the mask/score read: the caller's device tensors and param values (Kernel::forward passes
  // its call's); empty buffers → random contents of the declared shapes are generated.
  std::vector<ParamValue> params;
  std::vector<BufferArg> buffers;
  bool store = true;                    // write the result to the tuning cache
  int reps = 0;                         // timed launches per config; 0 → 10 (quick) / 20 (full)
};

struct TuneOutcome {
  autotune::SearchResult result;
  autotune::TuningKey key;
  autotune::GpuIdentity gpu;
  TileConfig heuristic;
  std::optional<autotune::Measurement> heuristic_m;  // when the heuristic config was timed
  bool stored = false;
  std::string store_error;
  std::string date;                     // of the stored entry
};

// Tunes one shape on `runtime`'s device: prune (plan_forward limits, shared memory vs the opt-in
// limit, registers/spills after load), time each candidate with CUDA events (warm-up, an L2 flush
// of ≥ 2 × L2 before every repetition, input sets rotating over more than the L2), rank by median
// (p20/p80 kept), store the winner in the tuning cache. Mode off: the heuristic, untimed.
// A config that fails to compile or launch is a failed candidate with its reason, never an error.
FLASHJIT_API TuneOutcome tune_shape(const Runtime& runtime, const TuneJob& job);

// `flashjit tune SPEC --shapes BxHxSqxSkv,... [--mode quick|full] [--json] [--deadline S] [--device N]`:
// `args` are the words after "tune". Exit codes: 0 ok, 1 a shape found no working config,
// 2 usage or spec error, 69 no GPU (after the spec was checked), 70 internal error. Never throws.
FLASHJIT_API int run_tune_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Parses "4x16x4096x4096,1x32x1024x2048" (x or ×); Error(usage) naming the bad item.
struct TuneShape {
  int64_t batch = 0, heads = 0, seq_q = 0, seq_kv = 0;
};
FLASHJIT_API std::vector<TuneShape> parse_tune_shapes(const std::string& text);

// Process-wide counters, for tests and logs.
struct TunerCounters {
  uint64_t tunes = 0;              // tune_shape searches that timed something
  uint64_t tuning_cache_hits = 0;  // lookups answered from the tuning cache (file or memo)
  uint64_t lookups = 0;
};
FLASHJIT_API TunerCounters tuner_counters();

// ---- Kernel::forward's choice per shape bucket -----------------------------------------------------

struct DispatchOptions {
  std::optional<std::string> autotune;  // "off" | "quick" | "full"; empty → FLASHJIT_AUTOTUNE
  bool tune_on_first_use = true;        // false: use stored tunings, never tune in forward()
  std::optional<double> tune_deadline_s;
};

// Owned by a Kernel. `base` is the kernel Runtime::compile built (heuristic or given config); the
// dispatch borrows it and owns the modules of other configs it loads. select() takes a shared lock
// for the lookup (an exclusive one only to add a bucket); the launch that follows is lock-free.
class KernelDispatch {
 public:
  KernelDispatch(std::shared_ptr<Context> ctx, AttentionSpec spec, CompileOptions options, DispatchOptions dispatch,
                 const CompiledKernel* base, const LoadedModule* base_loaded);
  ~KernelDispatch();
  KernelDispatch(const KernelDispatch&) = delete;
  KernelDispatch& operator=(const KernelDispatch&) = delete;

  struct Choice {
    const CompiledKernel* compiled = nullptr;  // valid as long as the dispatch
    const LoadedModule* loaded = nullptr;
    const std::string* why = nullptr;          // "heuristic ...", "tuned 2025-01-31 (quick, 1.234 ms)", "given ..."
  };
  // The kernel for this call's shape bucket. On the bucket's first call: tuning cache lookup, then
  // (mode quick/full, tune_on_first_use) tuning with the call's params/tensors, then the module.
  // A tuning that fails entirely falls back to the base kernel with a warning.
  Choice select(const ForwardArgs& args) const;

 private:
  struct Loaded;
  Choice choose(const ForwardArgs& args, const autotune::TuningKey& key) const;
  std::shared_ptr<Context> ctx_;
  AttentionSpec spec_;
  CompileOptions options_;
  DispatchOptions dispatch_;
  autotune::TuneMode mode_;
  const CompiledKernel* base_;
  const LoadedModule* base_loaded_;
  std::string base_why_;
  std::string spec_hash_;           // computed once: canonical() is too slow for every launch
  mutable std::shared_mutex mu_;    // guards buckets_ and modules_
  mutable std::mutex tune_mu_;      // one bucket decided at a time (tuning uses the whole GPU)
  mutable std::map<std::string, Choice> buckets_;        // bucket text → choice
  mutable std::map<std::string, std::string> whys_;      // bucket text → reason (stable storage)
  mutable std::set<std::string> unmemoised_whys_;        // reasons of calls that decided nothing
  mutable std::map<std::string, std::unique_ptr<Loaded>> modules_;  // config name → module
};

}  // namespace flashjit::rt

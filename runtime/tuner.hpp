// The autotuner on a device: one shape bucket of one spec, searched (autotune/search.hpp) with the
// template's legality rule, timed by runtime/tune_bench.hpp, stored in the tuning cache; and the
// tuning-cache lookups Kernel::forward's dispatch makes (memoised per process).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "autotune/search.hpp"
#include "autotune/tuning_key.hpp"
#include "flashjit/flashjit.hpp"
#include "runtime/context.hpp"
#include "runtime/handles.hpp"

namespace flashjit::rt {

// FLASHJIT_AUTOTUNE, or `value` when given ("off" | "quick" | "full"; Error(usage) otherwise).
autotune::TuneMode tune_mode(const std::optional<std::string>& value = std::nullopt);

// What a tuning was timed on, the first part of its key: the template's version ("fwd-42",
// "bwd-10"), then each switch of `target` that changes that template's kernels: "+wg" and "+prod"
// (the backward's FLASHJIT_BWD_WARPGROUPS and FLASHJIT_BWD_PRODUCER, on by default), and on sm_90a
// "+sync" (FLASHJIT_MMA=sync), "+notma" (the forward's FLASHJIT_TMA=off), "+jit" (the driver's JIT
// assembles: no setmaxnreg), and "+quick" (the forward's FLASHJIT_TIERED=quick).
std::string kernel_family(const Target& target, bool backward);

// A tuning is filed under "<kernel_family>-<spec hash>" and the shape's bucket: one timed on other
// kernels (another version of the template, or with a switch set otherwise) is never reused, and
// a flashjit that knows no backward tunings never mistakes one for a forward's.
// `page_size`: a forward on a paged K/V cache of that many rows per page (0: contiguous).
autotune::TuningKey tuning_key(const AnalyzedSpec& spec, const Target& target, const ProblemShape& shape,
                               bool backward = false, int page_size = 0);

// "tuned <date> (<mode>, <ms> ms median for bucket <bucket>)": why a bucket runs a tuned config.
std::string tuned_reason(const std::string& date, const std::string& mode, double median_ms, const std::string& bucket);

// The search space: the spec's `tune` section where it gives a list, the template's defaults for
// the rest; enumerated through the template's structural rule (KernelTemplate::check_shape).
autotune::SearchSpace search_space_for(const AnalyzedSpec& spec, const KernelTemplate& kernel_template);

// A stored tuning for (device, spec, shape bucket): the tuning cache, memoised per process (a
// miss is remembered too, until this process stores one).
std::optional<autotune::TuningEntry> lookup_tuning(const DeviceInfo& device, const AnalyzedSpec& spec,
                                                   const autotune::TuningKey& key);

// One shape to tune.
struct TuneJob {
  KernelSource source;
  bool backward = false;              // tune the backward's configs (attention_bwd), not the forward's
  ProblemShape shape;
  autotune::TuneMode mode = autotune::TuneMode::quick;
  std::optional<double> deadline_s;
  std::ostream* progress = nullptr;   // `[i/N] ...` lines and the summary table (e.g. &std::cerr)
  // What the mask/score read: the caller's device tensors and param values (Kernel::forward passes
  // its call's); empty buffers → random contents of the declared shapes are generated.
  std::vector<ParamValue> params;
  std::vector<BufferArg> buffers;
  bool store = true;                  // write the result to the tuning cache
  int reps = 0;                       // timed launches per config; 0 → 10 (quick) / 20 (full)
  // The forward on a paged K/V cache of this many rows per page (0: contiguous): the candidates
  // read K and V through a block table of shuffled pages, and the result has a bucket of its own.
  int page_size = 0;
};

struct TuneOutcome {
  autotune::SearchResult result;
  autotune::TuningKey key;
  autotune::GpuIdentity gpu;
  TileConfig heuristic;
  std::optional<autotune::Measurement> heuristic_m;  // when the heuristic config was timed
  bool stored = false;
  std::string store_error;
  std::string date;                   // of the stored entry
  // Forward on a decode-like shape: the winner timed with fixed split-KV counts after the search;
  // best_splits is the count stored (0: the automatic one was as fast, within 3%).
  std::vector<std::pair<int, autotune::Measurement>> splits_tried;
  int best_splits = 0;
};

// Tunes one shape in `ctx`: prune (the plan's limits, shared memory vs the opt-in limit,
// registers/spills after load), time each candidate (runtime/tune_bench.hpp), rank by median
// (p20/p80 kept), store the winner in the tuning cache. A config that fails to compile or launch
// is a failed candidate with its reason, never an error.
TuneOutcome tune_shape(const std::shared_ptr<Context>& ctx, const TuneJob& job);

// Process-wide counters, for cache_stats().
struct TunerCounters {
  uint64_t tunes = 0;              // tune_shape searches that timed something
  uint64_t tuning_cache_hits = 0;  // lookups answered from the tuning cache (file or memo)
  uint64_t lookups = 0;
};
TunerCounters tuner_counters();

}  // namespace flashjit::rt

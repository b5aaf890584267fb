// flashjit autotuning and cache statistics: tune a spec for a problem shape on a device, read a
// stored tuning, and count what the caches did in this process. No LLVM or CUDA types.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace flashjit {

struct TuneOptions {
  // "quick" (the heuristic's neighbourhood) | "full" (the pruned space); empty: full when
  // FLASHJIT_AUTOTUNE=full, else quick.
  std::string mode;
  std::optional<double> deadline_s;     // stop timing after this many seconds; the best so far wins
  std::ostream* progress = nullptr;     // "[i/N] ..." lines and the ranking table
  std::vector<ParamValue> params;       // what the mask/score read; empty → the spec's defaults
  std::vector<BufferArg> buffers;       // the spec's tensors; empty → random contents of their shapes
  bool store = true;                    // write the winner to the tuning cache
  int reps = 0;                         // timed launches per config; 0 → 10 (quick) / 20 (full)
  // Tune Kernel::backward's configs (its dK/dV and dQ kernels, timed together with the D
  // pre-pass) instead of the forward's; filed under the key "bwd-<n>[+switches]-<spec hash>/<bucket>",
  // n the backward kernels' version (a new version is tuned afresh).
  bool backward = false;
  // Tune the forward on a paged K/V cache of this many rows per page (a positive multiple of 16;
  // 0: contiguous K/V): the candidates read K and V through a block table of shuffled pages, and
  // the winner is filed under the bucket with "_p<page_size>", which Kernel::forward looks up for
  // calls with that page size.
  int page_size = 0;
};

// What one tuning found. Times are medians of CUDA-event timings, in milliseconds (-1: not timed).
struct TuneReport {
  ProblemShape shape;
  std::string bucket;        // the shape bucket the result is filed under, e.g. "sq4096_skv4096_bh64_d128x128"
  // "fwd-<n>[+switches]-<spec hash>/<bucket>" ("bwd-…" for the backward): n the kernels' version,
  // the switches those of the compile that change them ("+notma" for FLASHJIT_TMA=off, …)
  std::string key;
  std::string gpu;           // the GPU identity it belongs to
  TileConfig heuristic;      // the heuristic table's config
  double heuristic_ms = -1;  // its median, when it was timed
  bool found = false;        // a config was measured; false: `best` is the heuristic, untimed
  TileConfig best;
  double median_ms = -1, p20_ms = -1, p80_ms = -1;
  bool stored = false;
  std::string store_error;   // why it was not stored (the result is still used by this process)
  std::string date;          // ISO 8601 UTC of the stored entry
  std::string summary;       // one line: what was chosen and why
  std::string search_json;   // every candidate with its status, times and reasons, as a JSON object
};

// Tunes `spec` for `shape` on the runtime's device and stores the winner in the tuning cache
// (docs/autotune.md). Configs that fail to compile, launch or compute the right output are
// reported in the search, never raised. Error(usage) for a bad mode; Error(spec) for a bad spec.
FLASHJIT_API TuneReport tune(const Runtime& runtime, const AttentionSpec& spec, const ProblemShape& shape,
                             const TuneOptions& options = {});

// Several reports as one JSON array (what `flashjit tune --json` prints). Error(usage) when a
// report's search_json is neither empty nor JSON.
FLASHJIT_API std::string tune_reports_json(const std::vector<TuneReport>& reports);

// The stored tuning of this spec for the shape's bucket on the runtime's device, if any (of the
// backward's configs with `backward`; of the forward on a paged cache of `page_size` rows per page).
FLASHJIT_API std::optional<TileConfig> stored_tuning(const Runtime& runtime, const AttentionSpec& spec,
                                                     const ProblemShape& shape, bool backward = false,
                                                     int page_size = 0);

// What this process's caches and tuner did since it started.
struct CacheStats {
  uint64_t specs_analyzed = 0;       // specs parsed, checked and analysed (one per compile, none per launch)
  uint64_t llvm_compiles = 0;        // kernels compiled by LLVM (compile-cache misses and bypasses)
  uint64_t compile_cache_hits = 0, compile_cache_misses = 0, compile_cache_stores = 0;
  uint64_t compile_cache_store_failures = 0, compile_cache_bypasses = 0;
  uint64_t tunes = 0;                // tunings that timed something
  uint64_t tuning_lookups = 0, tuning_cache_hits = 0;
};
FLASHJIT_API CacheStats cache_stats();

// Points this process's caches at `dir` (tests, embedders that manage their own folders); ""
// restores cache_dir(). Knobs are read once per process; this is the way to move after start-up.
FLASHJIT_API void set_cache_dir(const std::string& dir);

}  // namespace flashjit

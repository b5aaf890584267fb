// The autotuner's search, without a GPU: enumerate the tile space, prune it with the resource
// model, choose candidates by mode, time them through a callback, and rank by median.
#pragma once

#include <functional>
#include <iosfwd>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/tuning_key.hpp"
#include "flashjit/flashjit.hpp"

namespace llvm::json {
class OStream;
}

namespace flashjit::autotune {

// The values each tile parameter may take (the template's, narrowed by the spec's `tune` section).
struct SearchSpace {
  std::vector<int> block_m, block_n, num_warps, num_stages;
  // The template's structural rule (not resources): combinations failing it are not enumerated at
  // all (the cross product of the lists would otherwise be mostly illegal). Null: every combination.
  std::function<bool(const TileConfig&)> legal;
};
enum class TuneMode { off, quick, full };
// "off" | "quick" | "full"; throws Error(usage) naming FLASHJIT_AUTOTUNE otherwise.
TuneMode parse_tune_mode(std::string_view text);
const char* tune_mode_name(TuneMode mode);

// What timing one config produced. A failure (compile error, launch error, wrong result) is data.
struct Measurement {
  bool ok = false;
  double median_ms = std::numeric_limits<double>::infinity();
  double p20_ms = std::numeric_limits<double>::infinity();
  double p80_ms = std::numeric_limits<double>::infinity();
  std::string failure_reason;
  std::string binary_hash;  // hash of the cubin that was timed ("" if unknown)
};

struct SearchCallbacks {
  // The resource model: a reason when `config` cannot run (shared memory, registers, limits).
  std::function<std::optional<std::string>(const TileConfig&)> prune;
  // Optional: the hash of the binary `config` compiles to, before timing (a compile, which the
  // compile cache makes cheap to repeat). Configs with the same hash are timed once. "" = unknown.
  std::function<std::string(const TileConfig&)> fingerprint;
  // Times `config`. Exceptions are caught and recorded as failures; they never escape the search.
  std::function<Measurement(const TileConfig&)> measure;
};

struct SearchOptions {
  TuneMode mode = TuneMode::quick;
  TileConfig heuristic;            // the heuristic table's choice: candidate #1 in every mode
  size_t quick_candidates = 8;     // at most this many in quick mode
  std::optional<double> deadline_s;  // stop timing after this many seconds; the best so far wins
  std::ostream* progress = nullptr;  // `[i/N] ...` lines and the summary table (e.g. &std::cerr)
  double progress_after_s = 1.0;     // print only when the run is predicted to take longer
  std::function<double()> clock;     // seconds; default: steady_clock (tests inject a fake one)
};

struct Candidate {
  enum class Status { measured, reused, failed, pruned, not_selected, skipped };
  TileConfig config;
  Status status = Status::not_selected;
  Measurement m;
  std::string note;  // prune reason, failure reason, "same binary as ...", "deadline reached"
};
const char* candidate_status_name(Candidate::Status s);

struct SearchResult {
  TuneMode mode = TuneMode::off;
  TileConfig best;
  bool measured = false;   // false: `best` is the heuristic default, untimed
  Measurement best_m;
  std::vector<Candidate> candidates;  // every enumerated config; selected ones first, in timing order
  size_t selected = 0;     // N of [i/N]
  size_t timed = 0;        // measure() calls
  bool deadline_hit = false;
  double elapsed_s = 0;
  std::string summary;     // one line: what was chosen and why
};

// Runs the search. Never throws for a config's failure; throws Error(usage) only for an empty
// space or missing callbacks.
SearchResult run_search(const SearchSpace& space, const SearchOptions& options, const SearchCallbacks& callbacks);

// The ranking table (measured first by median, then failures with reasons, then pruned counts).
void print_search_summary(std::ostream& out, const SearchResult& result);
// Machine-readable form: {"mode", "best", "measured", "median_ms", ..., "candidates": [...]}, written
// as one value of `json` so that a larger document can hold it.
void write_search_result(llvm::json::OStream& json, const SearchResult& result);
// The same as a document of its own.
std::string search_result_json(const SearchResult& result);
// What the tuning cache keeps of a measured result: the best config with its median and spread,
// and the runner-up table (every other timed config by median, then failures with reasons).
// Throws Error(internal) when !result.measured: an untimed heuristic must not be cached as tuned.
TuningEntry tuning_entry_from(const SearchResult& result, const std::string& spec_name);

}  // namespace flashjit::autotune

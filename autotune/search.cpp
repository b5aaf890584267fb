#include "autotune/search.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>

#include "autotune/tuning_key.hpp"

namespace flashjit::autotune {
namespace {

using Status = Candidate::Status;

std::vector<int> unique_in_order(const std::vector<int>& v) {
  std::vector<int> out;
  for (int x : v)
    if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  return out;
}

// Distance in the tile lattice, on the axes the template's cost depends on: rows per warp
// (block_m / num_warps: one or two 16-row m-tiles), warps, block_n and stages. One step =
// doubling/halving one of them, or one stage more or fewer, so bm64_w4 → bm128_w8 (more warps,
// same rows per warp) is one step, not two. Quick mode takes the heuristic's nearest
// neighbours: the heuristic is usually close to the optimum, and single-axis moves find the
// cheap wins (FlashAttention-2's own tuning tables differ from their default in one or two
// parameters; on the H200 the best d=256 config is two such steps away, docs/perf-notes.md §4).
double distance(const TileConfig& a, const TileConfig& b) {
  auto l2 = [](double x, double y) { return std::fabs(std::log2(x) - std::log2(y)); };
  return l2(double(a.block_m) / a.num_warps, double(b.block_m) / b.num_warps) + l2(a.block_n, b.block_n) +
         l2(a.num_warps, b.num_warps) + std::abs(a.num_stages - b.num_stages);
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  return buf;
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

std::vector<Candidate> enumerate(const SearchSpace& space, const TileConfig& heuristic) {
  std::vector<Candidate> out;
  auto add = [&](const TileConfig& c) {
    for (auto& e : out)
      if (same_config(e.config, c)) return;
    Candidate cand;
    cand.config = c;
    out.push_back(cand);
  };
  add(heuristic);  // always a candidate, even when the space lacks it: it is the baseline
  for (int bm : unique_in_order(space.block_m))
    for (int bn : unique_in_order(space.block_n))
      for (int w : unique_in_order(space.num_warps))
        for (int s : unique_in_order(space.num_stages))
          if (TileConfig c{bm, bn, w, s}; !space.legal || space.legal(c)) add(c);
  return out;
}

}  // namespace

TuneMode parse_tune_mode(std::string_view text) {
  if (text == "off") return TuneMode::off;
  if (text == "quick") return TuneMode::quick;
  if (text == "full") return TuneMode::full;
  throw Error(ErrorKind::usage, "FLASHJIT_AUTOTUNE='" + std::string(text) + "' is not allowed; use one of off|quick|full");
}

const char* tune_mode_name(TuneMode mode) {
  switch (mode) {
    case TuneMode::off: return "off";
    case TuneMode::quick: return "quick";
    case TuneMode::full: return "full";
  }
  return "?";
}

const char* candidate_status_name(Status s) {
  switch (s) {
    case Status::measured: return "measured";
    case Status::reused: return "reused";
    case Status::failed: return "failed";
    case Status::pruned: return "pruned";
    case Status::not_selected: return "not_selected";
    case Status::skipped: return "skipped";
  }
  return "?";
}

namespace {

// 1. Enumerate; 2. prune and select. The resource model (which may compile a config to read its
//    spills) rejects what cannot run before anything is timed. Full mode prunes everything and
//    keeps all survivors; quick mode walks the configs nearest the heuristic first (the heuristic
//    itself leads, as the baseline) and prunes only until it has its handful of survivors, so a
//    quick tune compiles a few configs, not the whole space. Returns the indices into `all` of
//    the selected configs, in timing order.
std::vector<size_t> select(std::vector<Candidate>& all, const SearchOptions& options, const SearchCallbacks& cb) {
  auto prune = [&](Candidate& c) {
    if (!cb.prune) return;
    try {
      if (auto why = cb.prune(c.config)) c.status = Status::pruned, c.note = *why;
    } catch (const std::exception& e) {
      c.status = Status::pruned, c.note = std::string("resource model failed: ") + e.what();
    }
  };
  std::vector<size_t> walk(all.size());
  for (size_t i = 0; i < all.size(); ++i) walk[i] = i;
  if (options.mode == TuneMode::quick)
    std::stable_sort(walk.begin(), walk.end(), [&](size_t a, size_t b) {
      return distance(all[a].config, options.heuristic) < distance(all[b].config, options.heuristic);
    });
  std::vector<size_t> order;
  for (size_t i : walk) {
    if (options.mode == TuneMode::quick && order.size() >= options.quick_candidates) break;
    prune(all[i]);
    if (all[i].status != Status::pruned) order.push_back(i);
  }
  return order;
}

// 3. Times candidate i of `selected`, or reuses the timing of an identical binary. Failures are
// data (infinitely slow, with the reason), never exceptions.
void time_candidate(std::vector<Candidate>& selected, size_t i, const SearchCallbacks& cb,
                    std::map<std::string, size_t>& by_binary, SearchResult& r) {
  Candidate& c = selected[i];
  std::string fp;
  try {
    if (cb.fingerprint) fp = cb.fingerprint(c.config);
  } catch (const std::exception& e) {
    c.status = Status::failed, c.note = e.what(), c.m = Measurement{}, c.m.failure_reason = e.what();
    return;
  }
  if (auto it = by_binary.find(fp); !fp.empty() && it != by_binary.end()) {
    // Byte-identical binaries run identically: reuse the timing instead of spending GPU time.
    c.m = selected[it->second].m;
    c.status = c.m.ok ? Status::reused : Status::failed;
    c.note = "same binary as " + config_name(selected[it->second].config) + ", not re-timed";
    if (!c.m.ok) c.note += ": " + c.m.failure_reason;
    return;
  }
  try {
    c.m = cb.measure(c.config);
  } catch (const std::exception& e) {
    c.m = Measurement{};
    c.m.failure_reason = e.what();
  }
  ++r.timed;
  if (!c.m.ok) {
    c.m.median_ms = c.m.p20_ms = c.m.p80_ms = std::numeric_limits<double>::infinity();
    if (c.m.failure_reason.empty()) c.m.failure_reason = "failed (no reason given)";
  }
  c.status = c.m.ok ? Status::measured : Status::failed;
  if (!c.m.ok) c.note = c.m.failure_reason;
  if (fp.empty()) fp = c.m.binary_hash;
  if (!fp.empty()) by_binary.emplace(fp, i);
}

// `[i/N] config → time (best so far) ETA`, once the whole run is predicted to take long enough.
void report_progress(const SearchOptions& options, const std::vector<Candidate>& selected, size_t i,
                     std::optional<size_t> best, double elapsed, bool& printing) {
  const size_t n = selected.size();
  const Candidate& c = selected[i];
  double eta = elapsed / double(i + 1) * double(n - i - 1);
  if (options.deadline_s) eta = std::max(0.0, std::min(eta, *options.deadline_s - elapsed));
  if (!printing && elapsed + eta >= options.progress_after_s) printing = true;
  if (!printing) return;
  std::string line = "[" + std::to_string(i + 1) + "/" + std::to_string(n) + "] " + config_name(c.config) + " → ";
  line += c.m.ok ? ms_text(c.m.median_ms) : "failed: " + c.m.failure_reason;
  if (c.status == Status::reused) line += " (same binary, not re-timed)";
  if (best) line += " (best " + ms_text(selected[*best].m.median_ms) + " " + config_name(selected[*best].config) + ")";
  line += " ETA " + seconds_text(eta);
  *options.progress << line << "\n" << std::flush;
}

// A later candidate replaces the best only when it is faster by more than this fraction. Candidates
// are timed in order of distance from the heuristic, so within the timing's noise the nearer config
// stays and two tunings of a shape agree (at 1×32/8×32768 decode, 64- and 128-key tiles time within
// 1% of each other; docs/perf-notes.md §19–§20).
constexpr double kTieMargin = 0.01;

// 4. The result: the fastest measured config, else the heuristic default (said so).
void summarize(SearchResult& r, const std::vector<Candidate>& all, const std::vector<Candidate>& selected,
               std::optional<size_t> best, const SearchOptions& options) {
  const std::string heuristic_name = config_name(options.heuristic);
  const Candidate* heuristic = nullptr;
  for (const Candidate& c : selected)
    if (same_config(c.config, options.heuristic)) heuristic = &c;
  size_t pruned = 0, failed = 0;
  for (const Candidate& c : all) pruned += c.status == Status::pruned;
  for (const Candidate& c : selected) failed += c.status == Status::failed;
  std::string counts = std::to_string(r.timed) + " of " + std::to_string(all.size()) + " configs timed (" +
                       tune_mode_name(options.mode) + "), " + std::to_string(pruned) + " pruned, " +
                       std::to_string(failed) + " failed";
  if (best) {
    const Candidate& b = selected[*best];
    r.best = b.config;
    r.measured = true;
    r.best_m = b.m;
    r.summary = "tuned: " + config_name(b.config) + " at " + ms_text(b.m.median_ms);
    if (heuristic && heuristic->m.ok && !same_config(b.config, options.heuristic)) {
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.2fx", heuristic->m.median_ms / b.m.median_ms);
      r.summary += ", " + std::string(ratio) + " faster than the heuristic default " + heuristic_name + " (" +
                   ms_text(heuristic->m.median_ms) + ")";
    } else if (same_config(b.config, options.heuristic)) {
      r.summary += " (the heuristic default is the fastest)";
    }
    const Candidate* fastest = &b;
    for (const Candidate& c : selected)
      if (c.m.ok && c.m.median_ms < fastest->m.median_ms) fastest = &c;
    if (fastest != &b) {
      // The gap is below the millisecond text's resolution for short kernels: say it in percent.
      char gap[48];
      std::snprintf(gap, sizeof gap, "%.1f%%", 100.0 * (1.0 - fastest->m.median_ms / b.m.median_ms));
      r.summary += "; kept over " + config_name(fastest->config) + ", " + gap + " faster but timed later and within the " +
                   std::to_string(int(kTieMargin * 100 + 0.5)) + "% tie margin";
    }
  } else {
    r.summary = "no candidate ran successfully; using the heuristic default " + heuristic_name + " (untimed)";
  }
  r.summary += "; " + counts;
  if (!heuristic && all[0].status == Status::pruned) r.summary += "; the heuristic default was pruned: " + all[0].note;
  if (r.deadline_hit) {
    size_t done = 0;
    for (const Candidate& c : selected) done += c.status != Status::skipped;
    r.summary += "; deadline of " + seconds_text(*options.deadline_s) + " reached after " + std::to_string(done) + "/" +
                 std::to_string(selected.size()) + " candidates, best so far used";
  }
}

}  // namespace

SearchResult run_search(const SearchSpace& space, const SearchOptions& options, const SearchCallbacks& cb) {
  SearchResult r;
  r.mode = options.mode;
  r.best = options.heuristic;
  if (options.mode == TuneMode::off) {
    r.summary = "autotune off: using the heuristic default " + config_name(options.heuristic) + " (untimed)";
    return r;
  }
  if (!cb.measure) throw Error(ErrorKind::usage, "autotune: no measure callback given");
  if (space.block_m.empty() || space.block_n.empty() || space.num_warps.empty() || space.num_stages.empty())
    throw Error(ErrorKind::usage, "autotune: the search space has an empty list (block_m, block_n, num_warps and "
                                  "num_stages each need at least one value)");
  std::function<double()> clock = options.clock;
  if (!clock)
    clock = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  const double start = clock();

  std::vector<Candidate> all = enumerate(space, options.heuristic);
  const std::vector<size_t> order = select(all, options, cb);
  std::vector<Candidate> selected;
  for (size_t i : order) selected.push_back(all[i]);
  r.selected = selected.size();

  std::map<std::string, size_t> by_binary;  // binary hash → index in `selected` of its timing
  std::optional<size_t> best;
  bool printing = false;
  for (size_t i = 0; i < selected.size(); ++i) {
    if (options.deadline_s && clock() - start >= *options.deadline_s) {
      r.deadline_hit = true;
      for (size_t k = i; k < selected.size(); ++k)
        selected[k].status = Status::skipped, selected[k].note = "deadline of " + seconds_text(*options.deadline_s) + " reached";
      break;
    }
    time_candidate(selected, i, cb, by_binary, r);
    if (selected[i].m.ok && (!best || selected[i].m.median_ms < selected[*best].m.median_ms * (1 - kTieMargin))) best = i;
    if (options.progress) report_progress(options, selected, i, best, clock() - start, printing);
  }
  r.elapsed_s = clock() - start;
  summarize(r, all, selected, best, options);

  // Every enumerated config appears once: selected in timing order, then the rest.
  r.candidates = std::move(selected);
  for (const Candidate& c : all) {
    bool chosen = false;
    for (size_t i : order) chosen = chosen || same_config(all[i].config, c.config);
    if (!chosen) r.candidates.push_back(c);
  }
  if (printing) print_search_summary(*options.progress, r);
  return r;
}

}  // namespace flashjit::autotune

#include "runtime/tuner.hpp"

#include <atomic>
#include <ctime>
#include <map>
#include <mutex>

#include "autotune/tuning_cache.hpp"
#include "compiler/kernel_template.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/timing.hpp"
#include "runtime/tune_bench.hpp"
#include "support/clock.hpp"
#include "support/knobs.hpp"
#include "support/log.hpp"
#include "templates/bwd/plan.hpp"
#include "templates/fwd/plan.hpp"

namespace flashjit::rt {

using autotune::TuneMode;

namespace {

struct Counts {
  std::atomic<uint64_t> tunes{0}, hits{0}, lookups{0};
};
Counts& counts() {
  static Counts c;
  return c;
}

// Tuning-cache lookups, memoised per process: (cache root | GPU file stem | key) → entry.
std::mutex memo_mu;
std::map<std::string, std::optional<autotune::TuningEntry>>& memo() {
  static std::map<std::string, std::optional<autotune::TuningEntry>> m;
  return m;
}
std::string memo_key(const autotune::GpuIdentity& gpu, const autotune::TuningKey& key) {
  return cache_dir() + "|" + gpu.file_stem() + "|" + key.str();
}

void store_result(TuneOutcome& out, const TuneJob& job) {
  autotune::TuningEntry e = autotune::tuning_entry_from(out.result, job.source.spec->spec.name);
  e.mode = autotune::tune_mode_name(job.mode);
  e.num_splits = out.best_splits;
  e.date = utc_iso8601(std::time(nullptr));
  out.date = e.date;
  try {
    autotune::TuningCache(cache_dir(), versions().flashjit).store(out.gpu, out.key, e);
    out.stored = true;
    e.flashjit_version = versions().flashjit;
    std::lock_guard<std::mutex> lock(memo_mu);
    memo()[memo_key(out.gpu, out.key)] = e;
  } catch (const std::exception& ex) {
    out.store_error = ex.what();
    log::warn(std::string("autotune: the result could not be stored in the tuning cache: ") + ex.what() +
              " (it is used in this process only)");
  }
}

// Split-KV counts for the search's winner on shapes whose unsplit launch leaves SMs idle (fewer
// CTAs than 4 waves of one per SM): FlashAttention-2's automatic rule (what the search timed)
// against fixed counts. A fixed count is kept only when it beats the automatic one by more than 3%,
// the spread of repeated timings of one config.
void sweep_splits(TuneBench& bench, TuneOutcome& out, const TuneJob& job, const DeviceInfo& info) {
  const ProblemShape& s = job.shape;
  const TileConfig& c = out.result.best;
  const int64_t ctas = (s.seq_q + c.block_m - 1) / c.block_m * s.heads_q * s.batch;
  const int64_t key_tiles = (s.seq_kv + c.block_n - 1) / c.block_n;
  if (ctas >= 4 * int64_t(info.sm_count) || key_tiles < 2) return;
  double best = out.result.best_m.median_ms;
  for (int n : {1, 2, 4, 8, 16, 32, 64, 128}) {
    if (n > key_tiles) break;
    bench.force_splits(n);
    const autotune::Measurement m = bench.measure(c);
    out.splits_tried.emplace_back(n, m);
    if (job.progress)
      *job.progress << "[splits " << n << "] " << c.str() << " → "
                    << (m.ok ? format_ms(m.median_ms) + " ms" : "failed: " + m.failure_reason) << " (automatic "
                    << format_ms(out.result.best_m.median_ms) << " ms)\n";
    if (m.ok && m.median_ms < 0.97 * best) {
      best = m.median_ms;
      out.best_splits = n;
    }
  }
  bench.force_splits(0);
  for (const auto& [n, m] : out.splits_tried)
    if (n == out.best_splits) out.result.best_m = m;
  if (job.progress)
    *job.progress << "split-KV: " << (out.best_splits ? std::to_string(out.best_splits) + " pieces" : std::string("automatic"))
                  << " for " << c.str() << " (" << format_ms(out.result.best_m.median_ms) << " ms)\n";
}

}  // namespace

TuneMode tune_mode(const std::optional<std::string>& value) {
  return autotune::parse_tune_mode(value ? *value : knob::get("FLASHJIT_AUTOTUNE"));
}

std::string kernel_family(const Target& target, bool backward) {
  std::string f = find_template(backward ? "attention_bwd" : "attention_fwd").version;
  if (backward) f += std::string(target.backward_warpgroups ? "+wg" : "") + (target.backward_producer ? "+prod" : "");
  // wgmma, TMA and setmaxnreg exist on sm_90a only: elsewhere these switches leave the code as it is.
  if (target.arch == "sm_90a") {
    if (!target.allow_wgmma) f += "+sync";
    if (!backward && !target.tma) f += "+notma";
    if (!target.moves_registers) f += "+jit";
  }
  if (!backward && target.quick) f += "+quick";
  return f;
}

autotune::TuningKey tuning_key(const AnalyzedSpec& spec, const Target& target, const ProblemShape& s, bool backward,
                               int page_size) {
  autotune::ShapeBucket bucket = autotune::ShapeBucket::of(s.batch, s.heads_q, s.seq_q, s.seq_kv, spec.spec.head_dim_qk,
                                                          spec.spec.head_dim_v, s.heads_kv);
  bucket.page_size = page_size;
  return {kernel_family(target, backward) + "-" + spec.spec_hash, bucket};
}

autotune::SearchSpace search_space_for(const AnalyzedSpec& spec, const KernelTemplate& kernel_template) {
  const TileSpace t = kernel_template.search_space(spec);
  autotune::SearchSpace s;
  s.block_m = t.block_m;
  s.block_n = t.block_n;
  s.num_warps = t.num_warps;
  s.num_stages = t.num_stages;
  s.legal = [check = kernel_template.check_shape](const TileConfig& c) { return !check(c); };
  return s;
}

std::optional<autotune::TuningEntry> lookup_tuning(const DeviceInfo& device, const AnalyzedSpec& spec,
                                                   const autotune::TuningKey& key) {
  const autotune::GpuIdentity gpu = autotune::gpu_identity(device);
  const std::string mk = memo_key(gpu, key);
  ++counts().lookups;
  {
    std::lock_guard<std::mutex> lock(memo_mu);
    if (auto it = memo().find(mk); it != memo().end()) {
      if (it->second) ++counts().hits;
      return it->second;
    }
  }
  std::optional<autotune::TuningEntry> e;
  try {
    e = autotune::TuningCache(cache_dir(), versions().flashjit).lookup(gpu, key);
  } catch (const std::exception& ex) {
    log::warn(std::string("tuning cache unreadable, treated as empty: ") + ex.what());
  }
  if (e) ++counts().hits;
  log::debug("tuning cache " + std::string(e ? "hit " : "miss ") + key.str() + " for " + gpu.str() + " (" +
             spec.spec.name + ")");
  std::lock_guard<std::mutex> lock(memo_mu);
  return memo().emplace(mk, e).first->second;
}

std::string tuned_reason(const std::string& date, const std::string& mode, double median_ms, const std::string& bucket) {
  return "tuned " + date + " (" + mode + ", " + format_ms(median_ms) + " ms median for bucket " + bucket + ")";
}

TuneOutcome tune_shape(const std::shared_ptr<Context>& ctx, const TuneJob& job) {
  ContextGuard guard(*ctx);
  const Runtime runtime = Runtime::create(ctx->info.ordinal);  // allocations in this context: it is current
  const KernelTemplate& kernel_template = find_template(job.backward ? "attention_bwd" : "attention_fwd");
  const AnalyzedSpec& spec = *job.source.spec;
  TuneOutcome out;
  out.gpu = autotune::gpu_identity(ctx->info);
  out.key = tuning_key(spec, job.source.target, job.shape, job.backward, job.page_size);
  // The centre is the shape's: what autotune off would run for it (the backward's walk, the
  // forward's decode, short-walk and long-walk rows), so that config is always timed. A paged
  // tuning's launches take the paged form, which none of the forward's rows serves.
  const ProblemShape& shape = job.shape;
  Target form = job.source.target;
  form.paged = job.page_size > 0;
  out.heuristic = job.backward ? backward_heuristic_for(job.source.spec, job.source.target, shape, job.params, nullptr)
                               : forward_shape_heuristic(
                                     spec, form, query_rows_per_kv_head(shape.seq_q, shape.heads_q, shape.heads_kv),
                                     shape.seq_kv, nullptr)
                                     .value_or(kernel_template.heuristic(spec, job.source.target, nullptr));
  std::unique_ptr<CandidateBench> bench = job.backward ? make_backward_bench(runtime, ctx, job)
                                                       : std::make_unique<TuneBench>(runtime, ctx, job);
  autotune::SearchOptions so;
  so.mode = job.mode;
  so.heuristic = out.heuristic;
  so.deadline_s = job.deadline_s;
  so.progress = job.progress;
  autotune::SearchCallbacks cb;
  cb.prune = [&](const TileConfig& c) { return bench->prune(c); };
  cb.fingerprint = [&](const TileConfig& c) { return bench->fingerprint(c); };
  cb.measure = [&](const TileConfig& c) { return bench->measure(c); };
  log::info("autotune " + std::string(autotune::tune_mode_name(job.mode)) + (job.backward ? " (backward)" : "") + ": " +
            (spec.spec.name.empty() ? "spec " + out.key.spec_hash : spec.spec.name) + " bucket " +
            out.key.bucket.str() + " on " + ctx->info.name);
  out.result = autotune::run_search(search_space_for(spec, kernel_template), so, cb);
  if (job.mode != TuneMode::off) ++counts().tunes;
  for (const autotune::Candidate& c : out.result.candidates)
    if (autotune::same_config(c.config, out.heuristic) && c.m.ok) out.heuristic_m = c.m;
  log::info("autotune " + out.key.str() + ": " + out.result.summary);
  if (out.result.measured && !job.backward && job.mode != TuneMode::off)
    sweep_splits(static_cast<TuneBench&>(*bench), out, job, ctx->info);
  if (out.result.measured && job.store) store_result(out, job);
  return out;
}

TunerCounters tuner_counters() { return {counts().tunes.load(), counts().hits.load(), counts().lookups.load()}; }

}  // namespace flashjit::rt

// The public tuning API (include/flashjit/tuning.hpp) over the runtime's tuner and caches.
#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include <cmath>

#include "flashjit/tuning.hpp"
#include "runtime/handles.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/tuner.hpp"

namespace flashjit {

namespace {

rt::KernelSource source_for(const Runtime& runtime, const AttentionSpec& spec) {
  const std::shared_ptr<rt::Context>& ctx = detail::Access::context(runtime, "tune");
  rt::KernelSource source;
  source.spec = analyze_spec(spec);
  source.target = target_for(CompileOptions{}, ctx->info.arch());
  source.stages = stage_options(CompileOptions{}, /*keep_ir_default=*/false);
  return source;
}

void write_config(llvm::json::OStream& j, const TileConfig& c) { j.value(c.str()); }

// JSON has no NaN or infinity: an untimed value is null.
void write_ms(llvm::json::OStream& j, double ms) {
  if (ms >= 0 && std::isfinite(ms)) j.value(ms);
  else j.value(nullptr);
}

}  // namespace

TuneReport tune(const Runtime& runtime, const AttentionSpec& spec, const ProblemShape& shape, const TuneOptions& o) {
  rt::TuneJob job;
  job.source = source_for(runtime, spec);
  job.shape = shape;
  if (o.mode.empty()) job.mode = rt::tune_mode() == autotune::TuneMode::full ? autotune::TuneMode::full : autotune::TuneMode::quick;
  else job.mode = autotune::parse_tune_mode(o.mode);
  if (job.mode == autotune::TuneMode::off)
    throw Error(ErrorKind::usage, "TuneOptions::mode 'off' tunes nothing; use quick or full");
  job.deadline_s = o.deadline_s;
  job.progress = o.progress;
  job.params = o.params;
  job.buffers = o.buffers;
  job.store = o.store;
  job.reps = o.reps;
  const rt::TuneOutcome out = rt::tune_shape(detail::Access::context(runtime, "tune"), job);
  TuneReport r;
  r.shape = shape;
  r.bucket = out.key.bucket.str();
  r.key = out.key.str();
  r.gpu = out.gpu.str();
  r.heuristic = out.heuristic;
  if (out.heuristic_m) r.heuristic_ms = out.heuristic_m->median_ms;
  r.found = out.result.measured;
  r.best = out.result.best;
  if (r.found) {
    r.median_ms = out.result.best_m.median_ms;
    r.p20_ms = out.result.best_m.p20_ms;
    r.p80_ms = out.result.best_m.p80_ms;
  }
  r.stored = out.stored;
  r.store_error = out.store_error;
  r.date = out.date;
  r.summary = out.result.summary;
  r.search_json = autotune::search_result_json(out.result);
  return r;
}

std::string tune_reports_json(const std::vector<TuneReport>& reports) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::json::OStream j(os);
  j.array([&] {
    for (const TuneReport& r : reports)
      j.object([&] {
        j.attributeArray("shape", [&] {
          for (int64_t v : {r.shape.batch, r.shape.heads_q, r.shape.seq_q, r.shape.seq_kv}) j.value(v);
        });
        j.attribute("bucket", r.bucket);
        j.attribute("key", r.key);
        j.attribute("gpu", r.gpu);
        j.attributeBegin("heuristic");
        write_config(j, r.heuristic);
        j.attributeEnd();
        j.attributeBegin("heuristic_ms");
        write_ms(j, r.heuristic_ms);
        j.attributeEnd();
        j.attribute("stored", r.stored);
        j.attributeBegin("search");
        j.rawValue(r.search_json);
        j.attributeEnd();
      });
  });
  os.flush();
  return text + "\n";
}

std::optional<TileConfig> stored_tuning(const Runtime& runtime, const AttentionSpec& spec, const ProblemShape& shape) {
  const AnalyzedSpecPtr a = analyze_spec(spec);
  const DeviceInfo& info = detail::Access::context(runtime, "stored_tuning")->info;
  if (std::optional<autotune::TuningEntry> e = rt::lookup_tuning(info, *a, rt::tuning_key(*a, shape))) return e->best;
  return std::nullopt;
}

CacheStats cache_stats() {
  const rt::KernelCacheCounters k = rt::kernel_cache_counters();
  const rt::TunerCounters t = rt::tuner_counters();
  CacheStats s;
  s.specs_analyzed = analyzed_spec_count();
  s.llvm_compiles = k.llvm_compiles;
  s.compile_cache_hits = k.hits;
  s.compile_cache_misses = k.misses;
  s.compile_cache_stores = k.stores;
  s.compile_cache_store_failures = k.store_failures;
  s.compile_cache_bypasses = k.bypasses;
  s.tunes = t.tunes;
  s.tuning_lookups = t.lookups;
  s.tuning_cache_hits = t.tuning_cache_hits;
  return s;
}

}  // namespace flashjit

// The public tuning API (include/flashjit/tuning.hpp) over the runtime's tuner and caches.
#include <llvm/Support/JSON.h>

#include <cmath>

#include "flashjit/tuning.hpp"
#include "runtime/assembler.hpp"
#include "runtime/handles.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/tuner.hpp"
#include "support/json.hpp"

namespace flashjit {

namespace {

rt::KernelSource source_for(const Runtime& runtime, const AttentionSpec& spec) {
  const std::shared_ptr<rt::Context>& ctx = detail::Access::context(runtime, "tune");
  rt::KernelSource source;
  source.spec = analyze_spec(spec);
  source.target = rt::device_target(CompileOptions{}, ctx->info);
  source.stages = stage_options(CompileOptions{}, /*keep_ir_default=*/false);
  return source;
}

// A report's time in ms; null when untimed (-1).
llvm::json::Value ms_json(double ms) { return number_or_null(ms >= 0 ? ms : NAN); }

// The report's search as a JSON value, so that one writer emits the whole document (its keys come
// out sorted: llvm::json::Object keeps no order); null when it has none.
llvm::json::Value search_json_value(const TuneReport& r) {
  if (r.search_json.empty()) return nullptr;
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(r.search_json);
  if (!v) throw Error(ErrorKind::usage, "TuneReport::search_json is not JSON: " + llvm::toString(v.takeError()));
  return std::move(*v);
}

void write_report(llvm::json::OStream& j, const TuneReport& r) {
  j.object([&] {
    j.attributeArray("shape", [&] {
      for (int64_t v : {r.shape.batch, r.shape.heads_q, r.shape.seq_q, r.shape.seq_kv}) j.value(v);
    });
    j.attribute("bucket", r.bucket);
    j.attribute("key", r.key);
    j.attribute("gpu", r.gpu);
    j.attribute("heuristic", r.heuristic.str());
    j.attribute("heuristic_ms", ms_json(r.heuristic_ms));
    j.attribute("stored", r.stored);
    j.attribute("search", search_json_value(r));
  });
}

// The search's JSON with the split-KV sweep added as "split_kv": {"best": n (0: automatic),
// "tried": [{"num_splits", "median_ms" | "failed"}]} when the winner was swept (decode-like shapes).
std::string with_splits(const std::string& search_json, const rt::TuneOutcome& out) {
  if (out.splits_tried.empty() || search_json.empty()) return search_json;
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(search_json);
  if (!v) {
    llvm::consumeError(v.takeError());
    return search_json;
  }
  if (!v->getAsObject()) return search_json;
  llvm::json::Array tried;
  for (const auto& [n, m] : out.splits_tried) {
    llvm::json::Object t{{"num_splits", n}};
    if (m.ok) t["median_ms"] = m.median_ms;
    else t["failed"] = m.failure_reason;
    tried.push_back(std::move(t));
  }
  (*v->getAsObject())["split_kv"] = llvm::json::Object{{"best", out.best_splits}, {"tried", std::move(tried)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << *v;
  return os.str();
}

}  // namespace

TuneReport tune(const Runtime& runtime, const AttentionSpec& spec, const ProblemShape& shape, const TuneOptions& o) {
  rt::TuneJob job;
  job.source = source_for(runtime, spec);
  job.shape = shape;
  if (o.mode.empty()) job.mode = rt::tune_mode() == autotune::TuneMode::full ? autotune::TuneMode::full : autotune::TuneMode::quick;
  else if (o.mode == "off")
    throw Error(ErrorKind::usage, "TuneOptions::mode 'off' tunes nothing; use quick or full");
  else if (o.mode != "quick" && o.mode != "full")  // the caller's option, not FLASHJIT_AUTOTUNE, is to blame
    throw Error(ErrorKind::usage, "TuneOptions::mode '" + o.mode + "' is not allowed; use quick or full");
  else job.mode = autotune::parse_tune_mode(o.mode);
  job.deadline_s = o.deadline_s;
  job.progress = o.progress;
  job.params = o.params;
  job.buffers = o.buffers;
  job.store = o.store;
  job.reps = o.reps;
  job.backward = o.backward;
  if (o.page_size < 0 || o.page_size % 16 != 0 || o.page_size > (1 << 20))
    throw Error(ErrorKind::usage, "TuneOptions::page_size " + std::to_string(o.page_size) +
                                      " is not allowed; use 0 (contiguous K/V) or a positive multiple of 16 (at most 2^20)");
  if (o.page_size && o.backward)
    throw Error(ErrorKind::usage, "TuneOptions::page_size applies to the forward; the backward reads contiguous K/V");
  job.page_size = o.page_size;
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
  if (!out.splits_tried.empty())
    r.summary += "; split-KV " + (out.best_splits ? std::to_string(out.best_splits) + " pieces (tuned)" : std::string("automatic"));
  r.search_json = with_splits(autotune::search_result_json(out.result), out);
  return r;
}

std::string tune_reports_json(const std::vector<TuneReport>& reports) {
  const std::string text = json_document([&](llvm::json::OStream& j) {
    j.array([&] {
      for (const TuneReport& r : reports) write_report(j, r);
    });
  });
  return text + "\n";
}

std::optional<TileConfig> stored_tuning(const Runtime& runtime, const AttentionSpec& spec, const ProblemShape& shape,
                                        bool backward, int page_size) {
  const DeviceInfo& info = detail::Access::context(runtime, "stored_tuning")->info;
  const rt::KernelSource source = source_for(runtime, spec);
  if (std::optional<autotune::TuningEntry> e = rt::lookup_tuning(
          info, *source.spec, rt::tuning_key(*source.spec, source.target, shape, backward, page_size)))
    return e->best;
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

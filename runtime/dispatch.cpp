#include "runtime/dispatch.hpp"

#include <iostream>

#include "runtime/tuner.hpp"
#include "runtime/upgrade.hpp"
#include "support/log.hpp"
#include "templates/fwd/plan.hpp"

namespace flashjit::rt {

using autotune::TuneMode;

bool stream_capturing(const Context& ctx, void* stream) {
  ContextGuard guard(ctx);
  int status = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
  return cu::driver().cuStreamIsCapturing(static_cast<cu::CUstream>(stream), &status) != cu::CUDA_SUCCESS || status != 0;
}

struct KernelDispatch::Loaded {
  std::shared_ptr<Context> ctx;
  CompiledModule m;
  ~Loaded() { unload_module(*ctx, m.loaded); }
};

KernelDispatch::KernelDispatch(std::shared_ptr<Context> ctx, KernelSource source, DispatchOptions dispatch,
                               const CompiledKernel* base, const LoadedModule* base_loaded, const Upgrade* upgrade)
    : ctx_(std::move(ctx)),
      source_(std::move(source)),
      dispatch_(std::move(dispatch)),
      mode_(tune_mode(dispatch_.autotune)),
      base_(base),
      base_loaded_(base_loaded),
      upgrade_(upgrade) {
  if (dispatch_.config_given) base_why_ = "given by the caller";
  else if (mode_ == TuneMode::off) base_why_ = base_->config_reason + " (autotune off)";
}

KernelDispatch::~KernelDispatch() = default;

std::unique_ptr<KernelDispatch::Loaded> KernelDispatch::load(const Target& target, const TileConfig& config,
                                                             std::string reason) const {
  KernelRequest request;
  request.target = target;
  request.config = config;
  auto l = std::make_unique<Loaded>();
  l->ctx = ctx_;
  l->m = compile_and_load(*ctx_, plan_kernel(source_.spec, request), source_.stages);
  l->m.compiled.config_reason = std::move(reason);
  return l;
}

KernelDispatch::Choice KernelDispatch::select(const ForwardArgs& args) const {
  Choice c = pick(args);
  if (c.compiled == base_ && upgrade_)
    if (const CompiledModule* full = upgrade_->ready()) c.compiled = &full->compiled, c.loaded = &full->loaded;
  return c;
}

KernelDispatch::Choice KernelDispatch::pick(const ForwardArgs& args) const {
  // A given config, or autotune off: the base kernel, no lookup, no lock; off, decode shapes, short
  // masked walks and long unmasked ones have rows of their own.
  if (!base_why_.empty()) {
    if (!dispatch_.config_given)
      if (std::optional<Choice> d = shape_choice(args)) return *d;
    return {base_, base_loaded_, &base_why_};
  }
  const autotune::TuningKey key =
      tuning_key(*source_.spec, source_.target, args, /*backward=*/false, int(args.page_size));
  const std::string bucket = key.bucket.str();
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (auto it = buckets_.find(bucket); it != buckets_.end()) return it->second;
  }
  std::lock_guard<std::mutex> one_at_a_time(tune_mu_);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (auto it = buckets_.find(bucket); it != buckets_.end()) return it->second;
  }
  return choose(args, key);
}

std::optional<KernelDispatch::Choice> KernelDispatch::shape_choice(const ForwardArgs& args) const {
  std::string reason;
  const std::optional<TileConfig> config =
      forward_shape_heuristic(*source_.spec, source_.target,
                              query_rows_per_kv_head(args.seq_q, args.heads_q, args.heads_kv), args.seq_kv, &reason);
  if (!config || autotune::same_config(*config, base_->config)) return std::nullopt;
  // Two rows may share a module (decode and short walks); each launch reports its own row's reason
  // (one text per row, so shape_whys_ stays small).
  const std::string name = config->str(), why = reason + " (autotune off)";
  auto found = [&]() -> std::optional<Choice> {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = modules_.find(name);
    auto w = shape_whys_.find(why);
    if (it == modules_.end() || w == shape_whys_.end()) return std::nullopt;
    return Choice{&it->second->m.compiled, &it->second->m.loaded, &*w};
  };
  if (std::optional<Choice> c = found()) return c;
  std::lock_guard<std::mutex> one_at_a_time(tune_mu_);
  if (std::optional<Choice> c = found()) return c;
  bool loaded = false;
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    loaded = modules_.count(name) > 0;
  }
  if (!loaded && stream_capturing(*ctx_, args.stream)) {
    const std::string table = base_->config.str();
    log::warn("forward: the kernel " + name + " for this shape is not loaded yet and the stream is capturing a " +
              "CUDA graph: this launch runs the table's " + table + " (run one call before capturing)");
    return std::nullopt;
  }
  std::unique_ptr<Loaded> l = loaded ? nullptr : load(source_.target, *config, why);
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = l ? modules_.emplace(name, std::move(l)).first : modules_.find(name);
  const std::string* w = &*shape_whys_.insert(why).first;
  log::info("shape row of " + base_->key + ": config " + name + " (" + why + ")");
  return Choice{&it->second->m.compiled, &it->second->m.loaded, w};
}

KernelDispatch::Choice KernelDispatch::variant(const Choice& c, const Form& form, void* stream) const {
  Target target = source_.target;
  target.pack_gqa = form.group;
  target.split_kv = form.split;
  target.varlen = form.varlen;
  target.paged = form.paged;
  target.page_size = form.page_size;
  // The heuristic's tile for the base form may be one only the base form's producer runs well (d =
  // 256 unmasked: 128-key tiles in one stage); this form then gets the heuristic's tile for itself.
  // A given or tuned config is kept: the tuner measured it in the forms it launches. Except a 96- or
  // 176-key tile, which only the whole-sequence form builds (plan_forward): there the form's own
  // tile, always.
  TileConfig config = c.compiled->config;
  bool own = false;  // this form's tile differs from the bucket's
  const bool whole_sequence_only = whole_sequence_tile(config);
  if (whole_sequence_only ||
      (!dispatch_.config_given && !c.tuned &&
       autotune::same_config(config, forward_heuristic(*source_.spec, source_.target, nullptr)))) {
    const TileConfig h = forward_heuristic(*source_.spec, target, nullptr);
    own = !autotune::same_config(h, config);
    config = h;
  }
  // Keyed by the config the module holds.
  const std::string name = config.str() + "+gqa" + std::to_string(form.group) + (form.split ? "+split" : "") +
                           (form.varlen ? "+varlen" : "") +
                           (form.paged ? "+paged" + std::to_string(form.page_size) : "");
  // The bucket's reason, unless this form got a tile of its own: then the module's.
  auto choice = [&](const Loaded& l) {
    return Choice{&l.m.compiled, &l.m.loaded, own ? &l.m.compiled.config_reason : c.why, c.splits, c.tuned};
  };
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (auto it = modules_.find(name); it != modules_.end()) return choice(*it->second);
  }
  if (stream_capturing(*ctx_, stream)) return {nullptr, nullptr, c.why, c.splits, c.tuned};  // asked only when loading
  std::lock_guard<std::mutex> one_at_a_time(tune_mu_);  // one compile of it, not one per thread
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (auto it = modules_.find(name); it != modules_.end()) return choice(*it->second);
  }
  std::string reason = c.compiled->config_reason;
  if (own) {
    forward_heuristic(*source_.spec, target, &reason);
    reason += whole_sequence_only ? " (for this launch's form: " + std::to_string(c.compiled->config.block_n) +
                                        "-key tiles serve whole sequences only)"
                                  : " (for this launch's form)";
  }
  std::unique_ptr<Loaded> l = load(target, config, reason);
  std::unique_lock<std::shared_mutex> lock(mu_);
  auto it = modules_.emplace(name, std::move(l)).first;
  return choice(*it->second);
}

TileConfig KernelDispatch::decide(const ForwardArgs& args, const autotune::TuningKey& key, std::string* why,
                                  bool* memoise, int* splits, bool* tuned) const {
  const std::string bucket = key.bucket.str();
  const DeviceInfo& info = ctx_->info;
  if (stream_capturing(*ctx_, args.stream)) {
    // Tuning synchronises and launches on other streams, and loading a tuned kernel's module may
    // synchronise: either would invalidate the caller's capture (CUDA Programming Guide, "Prohibited
    // and Unhandled Operations"). This call runs the already loaded heuristic kernel; the bucket
    // stays undecided, so the next call outside a capture decides it.
    *why = base_->config_reason + "; bucket " + bucket + " not decided: the stream is capturing a CUDA graph "
           "(run one call before capturing, or `flashjit tune`)";
    log::warn("autotune: " + *why);
    *memoise = false;
    return base_->config;
  }
  if (std::optional<autotune::TuningEntry> e = lookup_tuning(info, *source_.spec, key)) {
    *why = tuned_reason(e->date, e->mode, e->median_ms, bucket);
    *splits = e->num_splits;
    *tuned = true;
    return e->best;
  }
  if (!dispatch_.tune_on_first_use) {
    *why = base_->config_reason + "; no stored tuning for bucket " + bucket + " and tune_on_first_use is off";
    return base_->config;
  }
  try {
    ContextGuard guard(*ctx_);
    // The caller's tensors feed the mask: let the work that produces them finish first.
    cu::check(cu::driver().cuStreamSynchronize(static_cast<cu::CUstream>(args.stream)), "cuStreamSynchronize");
    TuneJob job;
    job.source = source_;
    job.shape = args;
    job.page_size = key.bucket.page_size;  // tuned on the layout whose bucket it fills
    job.mode = mode_;
    job.deadline_s = dispatch_.tune_deadline_s;
    job.progress = &std::cerr;
    job.params = args.params;
    job.buffers = args.buffers;
    log::info("autotune on first use of bucket " + bucket + " (FLASHJIT_AUTOTUNE=" + autotune::tune_mode_name(mode_) + ")");
    TuneOutcome o = tune_shape(ctx_, job);
    if (o.result.measured) {
      *why = tuned_reason(o.date, std::string(autotune::tune_mode_name(mode_)) + " now", o.result.best_m.median_ms, bucket);
      *splits = o.best_splits;
      *tuned = true;
      return o.result.best;
    }
    *why = base_->config_reason + "; tuning found no working config for bucket " + bucket + ": " + o.result.summary;
  } catch (const std::exception& e) {
    *why = base_->config_reason + "; tuning bucket " + bucket + " failed: " + e.what();
  }
  log::warn("autotune: " + *why);
  return base_->config;
}

KernelDispatch::Choice KernelDispatch::choose(const ForwardArgs& args, const autotune::TuningKey& key) const {
  const std::string bucket = key.bucket.str();
  std::string why;
  bool memoise = true;
  int splits = 0;
  bool tuned = false;
  const TileConfig config = decide(args, key, &why, &memoise, &splits, &tuned);
  Choice c{base_, base_loaded_, nullptr, splits, tuned};
  if (!autotune::same_config(config, base_->config)) {
    const std::string name = config.str();
    std::unique_lock<std::shared_mutex> lock(mu_, std::defer_lock);
    auto it = modules_.find(name);
    if (it == modules_.end()) {
      try {
        std::unique_ptr<Loaded> l = load(source_.target, config, "tuned");
        lock.lock();
        it = modules_.emplace(name, std::move(l)).first;
        lock.unlock();
      } catch (const std::exception& e) {
        why = base_->config_reason + "; the tuned config " + name + " could not be loaded: " + e.what();
        log::warn("autotune: " + why);
      }
    }
    if (it != modules_.end())
      c = {&it->second->m.compiled, &it->second->m.loaded, nullptr, splits, tuned};
    else
      c.splits = 0, c.tuned = false;  // the tuning's count belongs to its config
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (!memoise) {
    c.why = &*unmemoised_whys_.insert(why).first;  // stable storage; the bucket is decided later
    return c;
  }
  c.why = &whys_.emplace(bucket, why).first->second;
  buckets_.emplace(bucket, c);
  log::info("bucket " + bucket + " of " + base_->key + ": config " + c.compiled->config.str() + " (" + why + ")");
  return c;
}

}  // namespace flashjit::rt

// Kernel::backward: the bucket's module (runtime/backward.hpp), then the D pre-pass, the dK/dV
// kernel (or its dK and dV halves) and the dQ kernel, on the caller's stream with stream-ordered
// workspace (capturable in a CUDA graph). Where the plan fuses dQ into the dK/dV kernel, calls that
// are not deterministic take that path (dQ summed in fp32 by bulk reductions, in no fixed order);
// deterministic calls keep the two kernels, whose every gradient element has one writer.
#include "runtime/backward.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "runtime/dispatch.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/launch.hpp"
#include "runtime/scratch.hpp"
#include "runtime/timing.hpp"
#include "runtime/tuner.hpp"
#include "support/log.hpp"
#include "templates/bwd/backward.hpp"

namespace flashjit {

namespace rt {

BackwardModule::~BackwardModule() { unload_module(*ctx, loaded); }

std::shared_ptr<const BackwardModule> load_backward(const std::shared_ptr<Context>& ctx, const KernelSource& source,
                                                    const std::optional<TileConfig>& config, const char* reason) {
  KernelRequest request;
  request.template_name = "attention_bwd";
  request.target = source.target;
  request.config = config;
  PlannedKernel planned = plan_kernel(source.spec, request);
  auto m = std::make_shared<BackwardModule>();
  m->ctx = ctx;
  m->plan = plan_backward(source.spec, planned.config, planned.target);
  CompiledModule c = compile_and_load(*ctx, planned, source.stages);
  m->compiled = std::move(c.compiled);
  if (reason) m->compiled.config_reason = reason;
  m->loaded = c.loaded;
  m->registers = c.registers;
  m->spill_bytes = c.spill_bytes;
  ContextGuard guard(*ctx);
  const cu::Driver& d = cu::driver();
  const BackwardEntries names = backward_entries(m->plan, m->compiled.entry);
  auto get = [&](const std::string& name, int shared_bytes) {
    cu::CUfunction f = nullptr;
    cu::check(d.cuModuleGetFunction(&f, m->loaded.module, name.c_str()), "cuModuleGetFunction(backward)");
    // Over 48 KB of dynamic shared memory must be opted into per function (CUDA Programming Guide).
    if (shared_bytes > 48 * 1024)
      cu::check(d.cuFuncSetAttribute(f, cu::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_bytes),
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    return f;
  };
  if (m->plan.q.shared_bytes > ctx->info.shared_per_block_optin)
    throw Error(ErrorKind::spec, "the backward's dQ kernel needs " + std::to_string(m->plan.q.shared_bytes) +
                                     " bytes of shared memory; " + ctx->info.name + " allows " +
                                     std::to_string(ctx->info.shared_per_block_optin) + " per block");
  m->dq = get(names.dq, m->plan.q.shared_bytes);
  m->prep = get(names.prep, 0);
  if (m->plan.fused_dq) {
    m->dkdv_det = get(names.dkdv_det, m->plan.kv.shared_bytes);
    m->dq_convert = get(names.dq_convert, 0);
  }
  if (!names.map_q.empty()) {
    m->map_q = get(names.map_q, 0);
    m->map_kv = get(names.map_kv, 0);
  }
  if (!names.dv.empty()) m->dv = get(names.dv, m->plan.kv.shared_bytes);
  cu::check(d.cuFuncGetAttribute(&m->dq_registers, cu::CU_FUNC_ATTRIBUTE_NUM_REGS, m->dq), "cuFuncGetAttribute");
  cu::check(d.cuFuncGetAttribute(&m->dq_spill_bytes, cu::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, m->dq),
            "cuFuncGetAttribute");
  log::info("backward " + m->compiled.key + ": dK/dV kernel " + std::to_string(m->registers) + " registers, " +
            std::to_string(m->spill_bytes) + " bytes local" + (m->plan.fused_dq ? " (with dQ)" : "") + "; dQ kernel " +
            std::to_string(m->dq_registers) + " registers, " + std::to_string(m->dq_spill_bytes) + " bytes local" +
            (m->plan.fused_dq ? "" : "; " + m->plan.fused_dq_note));
  return m;
}

namespace {

BackwardState& state(const detail::Access::KernelImpl& k) {
  if (!k.backward) k.backward = std::make_unique<BackwardState>();
  return *k.backward;
}

const BackwardModule& base_locked(const detail::Access::KernelImpl& k) {
  BackwardState& s = state(k);
  if (!s.base) {
    s.base = load_backward(k.ctx, k.source, k.source.backward_config);
    s.by_config.emplace(s.base->compiled.config.str(), s.base);
  }
  return *s.base;
}

// The config for a bucket without a module yet, and why: a stored tuning, a tuning now, or the base's.
TileConfig decide(const detail::Access::KernelImpl& k, const BackwardArgs& args, const autotune::TuningKey& key,
                  autotune::TuneMode mode, std::string* why) {
  const BackwardModule& base = base_locked(k);
  const std::string bucket = key.bucket.str();
  if (std::optional<autotune::TuningEntry> e = lookup_tuning(k.ctx->info, *k.spec, key)) {
    *why = tuned_reason(e->date, e->mode, e->median_ms, bucket);
    return e->best;
  }
  if (!k.dispatch_options.tune_on_first_use) {
    *why = base.compiled.config_reason + "; no stored backward tuning for bucket " + bucket;
    return base.compiled.config;
  }
  try {
    ContextGuard guard(*k.ctx);
    // The caller's tensors feed the mask: let the work that produces them finish first.
    cu::check(cu::driver().cuStreamSynchronize(static_cast<cu::CUstream>(args.stream)), "cuStreamSynchronize");
    TuneJob job;
    job.source = k.source;
    job.backward = true;
    job.shape = args;
    job.mode = mode;
    job.deadline_s = k.dispatch_options.tune_deadline_s;
    job.progress = &std::cerr;
    job.params = args.params;
    job.buffers = args.buffers;
    log::info("autotune on first use of backward bucket " + bucket);
    TuneOutcome o = tune_shape(k.ctx, job);
    if (o.result.measured) {
      *why = tuned_reason(o.date, std::string(autotune::tune_mode_name(mode)) + " now", o.result.best_m.median_ms, bucket);
      return o.result.best;
    }
    *why = base.compiled.config_reason + "; tuning found no working backward config for bucket " + bucket + ": " +
           o.result.summary;
  } catch (const std::exception& e) {
    *why = base.compiled.config_reason + "; tuning backward bucket " + bucket + " failed: " + e.what();
  }
  log::warn("autotune: " + *why);
  return base.compiled.config;
}

// Autotune off: the table's config or, for this shape's walk, backward_heuristic_for's, its module
// loaded on first use (not while the stream captures a graph: then the base, with a warning).
// Deterministic calls keep the table's: the long-walk kernel gains by adding dQ itself, which they
// do not take, and without it ran 4–7% slower (docs/perf-notes.md §32).
const BackwardModule& untuned(const detail::Access::KernelImpl& k, const BackwardArgs& args) {
  const BackwardModule& base = base_locked(k);
  if (args.deterministic) return base;
  std::string reason;
  const TileConfig config = backward_heuristic_for(k.source.spec, k.source.target, args, args.params, &reason);
  if (autotune::same_config(config, base.compiled.config)) return base;
  BackwardState& s = state(k);
  if (auto it = s.by_config.find(config.str()); it != s.by_config.end()) return *it->second;
  if (stream_capturing(*k.ctx, args.stream)) {
    log::warn("backward: the kernel " + config.str() + " for this shape (" + reason + ") is not loaded yet and " +
              "the stream is capturing a CUDA graph: this launch runs " + base.compiled.config.str() +
              " (run one backward before capturing)");
    return base;
  }
  reason += " (autotune off)";
  std::shared_ptr<const BackwardModule> m = load_backward(k.ctx, k.source, config, reason.c_str());
  s.by_config.emplace(config.str(), m);
  log::info("backward shape of " + base.compiled.key + ": config " + config.str() + " (" + reason + ")");
  return *m;
}

}  // namespace

const BackwardModule& backward_base(const detail::Access::KernelImpl& k) {
  std::lock_guard<std::mutex> lock(k.backward_mu);
  return base_locked(k);
}

const BackwardModule& backward_for(const detail::Access::KernelImpl& k, const BackwardArgs& args) {
  std::lock_guard<std::mutex> lock(k.backward_mu);
  const BackwardModule& base = base_locked(k);
  if (k.source.backward_config) return base;
  const autotune::TuneMode mode = tune_mode(k.dispatch_options.autotune);
  if (mode == autotune::TuneMode::off) return untuned(k, args);
  const autotune::TuningKey key = tuning_key(*k.spec, k.source.target, args, /*backward=*/true);
  const std::string bucket = key.bucket.str();
  BackwardState& s = state(k);
  if (auto it = s.by_bucket.find(bucket); it != s.by_bucket.end()) return *it->second;
  if (stream_capturing(*k.ctx, args.stream)) {
    // As Kernel::forward: no tuning or module load inside a capture; the bucket stays undecided.
    log::warn("autotune: backward bucket " + bucket + " not decided: the stream is capturing a CUDA graph "
              "(run one backward before capturing, or `flashjit tune --backward`)");
    return base;
  }
  std::string why;
  const TileConfig config = decide(k, args, key, mode, &why);
  std::shared_ptr<const BackwardModule> m = s.base;
  if (auto it = s.by_config.find(config.str()); it != s.by_config.end()) {
    m = it->second;
  } else {
    try {
      m = load_backward(k.ctx, k.source, config, "tuned");
      s.by_config.emplace(config.str(), m);
    } catch (const std::exception& e) {
      why = base.compiled.config_reason + "; the tuned backward config " + config.str() + " could not be loaded: " +
            e.what();
      log::warn("autotune: " + why);
    }
  }
  s.by_bucket.emplace(bucket, m);
  log::info("backward bucket " + bucket + " of " + base.compiled.key + ": config " + m->compiled.config.str() + " (" +
            why + ")");
  return *m;
}

namespace {

void run_on_stream(const BackwardArgs& args, BackwardLaunch& launch, cu::CUfunction f, unsigned grid_x, int64_t heads,
                   int threads, int smem, const char* what) {
  if (grid_x == 0) return;
  check_launch(cu::driver().cuLaunchKernel(f, grid_x, static_cast<unsigned>(heads), static_cast<unsigned>(args.batch),
                                           static_cast<unsigned>(threads), 1, 1, static_cast<unsigned>(smem),
                                           static_cast<cu::CUstream>(args.stream), launch.forward.slots.data(), nullptr),
               what, args.stream);
}

unsigned row_tiles(int64_t n, int rows) { return static_cast<unsigned>((n + rows - 1) / rows); }

int32_t* entries(const DeviceBuffer& b) { return static_cast<int32_t*>(b.data()); }

void use_maps(BackwardLaunch& launch, const BlockMap::Impl& map) {
  launch.set_maps(entries(map.q_tiles), entries(map.q_counts), entries(map.tiles), entries(map.counts));
}

}  // namespace

void run_backward_map_passes(const BackwardModule& m, const BackwardArgs& args, BackwardLaunch& launch, bool q_map) {
  if (q_map)
    run_on_stream(args, launch, m.map_q, row_tiles(args.seq_q, m.plan.q.rows), args.heads_q, kMapThreads, 0,
                  "cuLaunchKernel(backward dQ block map)");
  run_on_stream(args, launch, m.map_kv, row_tiles(args.seq_kv, m.plan.kv.rows), args.heads_q, kMapThreads, 0,
                "cuLaunchKernel(backward dK/dV block map)");
}

BackwardMapSizes backward_map_sizes(const AnalyzedSpec& spec, const BackwardPlan& plan, const ProblemShape& s) {
  const BlockMapPolicy& policy = spec.block_map;
  const int64_t maps = (policy.per_batch ? s.batch : 1) * (policy.per_head ? s.heads_q : 1);
  const int64_t q_rows = row_tiles(s.seq_q, plan.q.rows), kv_rows = row_tiles(s.seq_kv, plan.kv.rows);
  BackwardMapSizes z;
  z.q_tiles = size_t(checked_product({maps, q_rows, int64_t(row_tiles(s.seq_kv, plan.q.cols)), 4}, "backward: the block map size"));
  z.kv_tiles = size_t(checked_product({maps, kv_rows, int64_t(row_tiles(s.seq_q, plan.kv.cols)), 4}, "backward: the block map size"));
  z.q_counts = size_t(maps * q_rows * 4);
  z.kv_counts = size_t(maps * kv_rows * 4);
  return z;
}

std::vector<uint64_t> backward_map_key(const BackwardArgs& a, const BackwardLaunch& launch, size_t params,
                                       const BackwardPlan& plan) {
  return block_map_key(a, {plan.q.rows, plan.q.cols, plan.kv.rows, plan.kv.cols}, launch.forward, params);
}

void launch_backward(const BackwardModule& m, const AnalyzedSpec& spec, const BackwardArgs& args,
                     BackwardLaunch& launch, const BlockMap::Impl* map) {
  const BackwardPlan& plan = m.plan;
  auto stream = static_cast<cu::CUstream>(args.stream);
  ContextGuard guard(*m.ctx);
  const cu::Driver& d = cu::driver();
  const size_t rows = size_t(rt::checked_product({args.batch, args.heads_q, args.seq_q, 4}, "backward: the workspace size") / 4);
  StreamScratch scratch(*m.ctx, stream);  // after the guard: freed with the context current
  const cu::CUdeviceptr delta = scratch.alloc(rows * 4, "backward workspace");
  const bool fused = plan.fused_dq && !args.deterministic;
  cu::CUdeviceptr dq_accum = 0;
  if (fused) {
    rt::checked_product({args.batch, args.heads_q, args.seq_q + 63, plan.attention().head_dim_qk + 63, 4},
                        "backward: the dQ workspace size");
    const int64_t n = dq_accum_floats(args.batch, args.heads_q, args.seq_q, plan.attention().head_dim_qk);
    dq_accum = scratch.alloc(size_t(n) * 4, "backward dQ workspace");
    if (n > 0)  // seq_q = 0 (keys only): nothing to sum, and no conversion launch either
      check_launch(d.cuMemsetD32Async(dq_accum, 0u, size_t(n), stream), "cuMemsetD32Async(backward dQ workspace)",
                   args.stream);
  }
  launch.set_workspace(reinterpret_cast<float*>(delta), reinterpret_cast<float*>(dq_accum));
  // Block maps (masks that read tensors): the caller's, else built on the stream now and freed
  // after the kernels. The dQ kernel's map (key tiles per query tile) only where that kernel runs:
  // with dQ summed in the dK/dV kernel only the keys' map (query tiles per key tile) is read.
  const bool map_q = m.map_q && !fused;
  if (map) {
    use_maps(launch, *map);
  } else if (m.map_kv) {
    const BackwardMapSizes z = backward_map_sizes(spec, plan, args);
    auto alloc = [&](size_t bytes) { return reinterpret_cast<int32_t*>(scratch.alloc(bytes, "backward block map")); };
    int32_t* q_tiles = map_q ? alloc(z.q_tiles) : nullptr;
    int32_t* q_counts = map_q ? alloc(z.q_counts) : nullptr;
    int32_t* kv_tiles = alloc(z.kv_tiles);
    launch.set_maps(q_tiles, q_counts, kv_tiles, alloc(z.kv_counts));
  }
  auto run = [&](cu::CUfunction f, unsigned grid_x, int64_t heads, int threads, int smem, const char* what) {
    run_on_stream(args, launch, f, grid_x, heads, threads, smem, what);
  };
  if (log::enabled(log::Level::info))
    log::info("backward launch " + m.compiled.key + " " + m.compiled.config.str() + (plan.split_kv ? " (dK, dV split)" : "") +
                     (plan.warpgroup_split ? " (dK, dV by warpgroup)" : "") +
              (fused ? " (dQ in the dK/dV kernel)"
                     : plan.fused_dq ? " (deterministic: dQ by its own kernel)" : " (" + plan.fused_dq_note + ")"));
  if (m.map_kv && !map) run_backward_map_passes(m, args, launch, map_q);
  run(m.prep, row_tiles(args.seq_q, kPrepRows), args.heads_q, kPrepThreads, 0, "cuLaunchKernel(backward D pre-pass)");
  const unsigned key_tiles = row_tiles(args.seq_kv, plan.kv.rows);
  run(plan.fused_dq && !fused ? m.dkdv_det : m.loaded.function, key_tiles, args.heads_kv, plan.kv.threads,
      plan.kv.shared_bytes, "cuLaunchKernel(backward dK/dV)");
  if (m.dv) run(m.dv, key_tiles, args.heads_kv, plan.kv.threads, plan.kv.shared_bytes, "cuLaunchKernel(backward dV)");
  if (fused)
    run(m.dq_convert, row_tiles(args.seq_q, kPrepRows), args.heads_q, kPrepThreads, 0, "cuLaunchKernel(backward dQ conversion)");
  else
    run(m.dq, row_tiles(args.seq_q, plan.q.rows), args.heads_q, plan.q.threads, plan.q.shared_bytes,
        "cuLaunchKernel(backward dQ)");
  scratch.free();
}

}  // namespace rt

const CompiledKernel& Kernel::backward_compiled() const {
  return rt::backward_base(detail::Access::impl(*this, "backward_compiled")).compiled;
}

const CompiledKernel& Kernel::backward_compiled(const ProblemShape& shape, bool deterministic) const {
  BackwardArgs args;
  static_cast<ProblemShape&>(args) = shape;
  args.deterministic = deterministic;
  return rt::backward_for(detail::Access::impl(*this, "backward_compiled"), args).compiled;
}

void Kernel::backward(const BackwardArgs& args) const {
  const Impl& k = detail::Access::impl(*this, "backward");
  rt::BackwardLaunch launch;
  rt::pack_backward(*k.spec, args, launch);
  {
    rt::ContextGuard guard(*k.ctx);
    rt::check_stream(*k.ctx, args.stream, "backward");  // before tuning or allocating on it
  }
  if (args.batch == 0 || (args.seq_q == 0 && args.seq_kv == 0)) return;
  const rt::BackwardModule& m = rt::backward_for(k, args);
  const BlockMap::Impl* map = args.block_map ? args.block_map->impl() : nullptr;
  if (args.block_map) {
    if (!m.map_kv)
      throw Error(ErrorKind::usage, "backward: block_map given, but this kernel's mask has an exact closed form and no "
                                    "block map");
    if (map && !map->backward)
      throw Error(ErrorKind::usage, "backward: block_map was built by build_block_map (the forward's); a backward "
                                    "call takes the map of this kernel's build_backward_block_map");
    if (!map || map->kernel != &k ||
        map->key != rt::backward_map_key(args, launch, k.spec->dsl.params.size(), m.plan))
      throw Error(ErrorKind::usage, "backward: block_map was built for another kernel, sizes, params or backward tile "
                                    "config; build it with this kernel's build_backward_block_map for these arguments");
  }
  rt::launch_backward(m, *k.spec, args, launch, map);
}

BlockMap Kernel::build_backward_block_map(const BackwardArgs& args) const {
  const Impl& k = detail::Access::impl(*this, "build_backward_block_map");
  if (args.block_map)
    throw Error(ErrorKind::usage, "build_backward_block_map: args.block_map must be null (a map is built from the "
                                  "tensors)");
  rt::BackwardLaunch launch;
  rt::pack_backward(*k.spec, args, launch);  // the arguments checked before they choose (or tune) a config
  {
    rt::ContextGuard guard(*k.ctx);
    rt::check_stream(*k.ctx, args.stream, "build_backward_block_map");
  }
  // The config backward(args) will use; an empty problem, which backward() launches nothing for,
  // takes the base config and runs no pass.
  const bool empty = args.batch == 0 || (args.seq_q == 0 && args.seq_kv == 0);
  const rt::BackwardModule& m = empty ? rt::backward_base(k) : rt::backward_for(k, args);
  if (!m.map_kv)
    throw Error(ErrorKind::usage, "build_backward_block_map: the mask of kernel " + k.compiled.key +
                                      " has an exact closed form; it needs no block map");
  auto impl = std::make_shared<BlockMap::Impl>();
  impl->kernel = &k;
  impl->backward = true;
  impl->key = rt::backward_map_key(args, launch, k.spec->dsl.params.size(), m.plan);
  const rt::BackwardMapSizes z = rt::backward_map_sizes(*k.spec, m.plan, args);
  const Runtime rt = detail::Access::runtime(k.ctx);  // the map's buffers live in the kernel's context
  impl->q_tiles = rt.alloc(z.q_tiles);
  impl->q_counts = rt.alloc(z.q_counts);
  impl->tiles = rt.alloc(z.kv_tiles);
  impl->counts = rt.alloc(z.kv_counts);
  rt::use_maps(launch, *impl);
  if (!empty) {
    rt::ContextGuard guard(*k.ctx);
    rt::run_backward_map_passes(m, args, launch, /*q_map=*/true);
  }
  BlockMap map;
  map.impl_ = impl;
  return map;
}

double Runtime::time_backward(const Kernel& kernel, const BackwardArgs& args, int warmup, int reps) const {
  return rt::median_ms(*detail::Access::context(*this, "time_backward"), static_cast<cu::CUstream>(args.stream), warmup,
                       reps, [&] { kernel.backward(args); });
}

}  // namespace flashjit

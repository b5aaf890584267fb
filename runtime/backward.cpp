// Kernel::backward: the D pre-pass, then the dK/dV kernel (or its dK and dV halves) and the dQ
// kernel, on the caller's stream with stream-ordered workspace (capturable in a CUDA graph). No
// kernel uses atomics, so every call is deterministic (BackwardArgs::deterministic).
#include "runtime/backward.hpp"

#include <algorithm>

#include "runtime/kernel_cache.hpp"
#include "runtime/launch.hpp"
#include "runtime/timing.hpp"
#include "support/log.hpp"
#include "templates/bwd/backward.hpp"

namespace flashjit {

namespace rt {

BackwardModule::~BackwardModule() { unload_module(*ctx, loaded); }

const BackwardModule& backward_module(const detail::Access::KernelImpl& k) {
  std::lock_guard<std::mutex> lock(k.backward_mu);
  if (k.backward) return *k.backward;
  KernelRequest request;
  request.template_name = "attention_bwd";
  request.target = k.source.target;
  request.config = k.source.backward_config;
  PlannedKernel planned = plan_kernel(k.spec, request);
  auto m = std::make_shared<BackwardModule>();
  m->ctx = k.ctx;
  m->plan = plan_backward(k.spec, planned.config, planned.target);
  CompiledModule c = compile_and_load(*k.ctx, planned, k.source.stages);
  m->compiled = std::move(c.compiled);
  m->loaded = c.loaded;
  m->registers = c.registers;
  m->spill_bytes = c.spill_bytes;
  ContextGuard guard(*k.ctx);
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
  if (m->plan.q.shared_bytes > k.ctx->info.shared_per_block_optin)
    throw Error(ErrorKind::spec, "the backward's dQ kernel needs " + std::to_string(m->plan.q.shared_bytes) +
                                     " bytes of shared memory; " + k.ctx->info.name + " allows " +
                                     std::to_string(k.ctx->info.shared_per_block_optin) + " per block");
  m->dq = get(names.dq, m->plan.q.shared_bytes);
  m->prep = get(names.prep, 0);
  if (!names.map_q.empty()) {
    m->map_q = get(names.map_q, 0);
    m->map_kv = get(names.map_kv, 0);
  }
  if (!names.dv.empty()) m->dv = get(names.dv, m->plan.kv.shared_bytes);
  cu::check(d.cuFuncGetAttribute(&m->dq_registers, cu::CU_FUNC_ATTRIBUTE_NUM_REGS, m->dq), "cuFuncGetAttribute");
  cu::check(d.cuFuncGetAttribute(&m->dq_spill_bytes, cu::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, m->dq),
            "cuFuncGetAttribute");
  log::info("backward " + m->compiled.key + ": dK/dV kernel " + std::to_string(m->registers) + " registers, " +
            std::to_string(m->spill_bytes) + " bytes local; dQ kernel " + std::to_string(m->dq_registers) +
            " registers, " + std::to_string(m->dq_spill_bytes) + " bytes local");
  k.backward = m;
  return *m;
}

}  // namespace rt

const CompiledKernel& Kernel::backward_compiled() const {
  return rt::backward_module(detail::Access::impl(*this, "backward_compiled")).compiled;
}

void Kernel::backward(const BackwardArgs& args) const {
  const Impl& k = detail::Access::impl(*this, "backward");
  rt::BackwardLaunch launch;
  rt::pack_backward(*k.spec, args, launch);
  if (args.batch == 0 || (args.seq_q == 0 && args.seq_kv == 0)) return;
  const rt::BackwardModule& m = rt::backward_module(k);
  const BackwardPlan& plan = m.plan;
  auto stream = static_cast<cu::CUstream>(args.stream);
  rt::ContextGuard guard(*k.ctx);
  const cu::Driver& d = cu::driver();
  const size_t rows = size_t(rt::checked_product({args.batch, args.heads_q, args.seq_q, 4}, "backward: the workspace size") / 4);
  cu::CUdeviceptr delta = 0;
  cu::check(d.cuMemAllocAsync(&delta, std::max<size_t>(rows * 4, 4), stream), "cuMemAllocAsync(backward workspace)");
  launch.set_workspace(reinterpret_cast<float*>(delta));
  // Block maps (masks that read tensors): built on the stream now, freed after the kernels.
  std::vector<cu::CUdeviceptr> maps;
  auto alloc = [&](size_t entries) {
    cu::CUdeviceptr p = 0;
    cu::check(d.cuMemAllocAsync(&p, std::max<size_t>(entries * 4, 4), stream), "cuMemAllocAsync(backward block map)");
    maps.push_back(p);
    return reinterpret_cast<int32_t*>(p);
  };
  const BlockMapPolicy& policy = k.spec->block_map;
  const size_t n_maps = size_t(policy.per_batch ? args.batch : 1) * size_t(policy.per_head ? args.heads_q : 1);
  auto ceil_div = [](int64_t n, int d_) { return size_t((n + d_ - 1) / d_); };
  if (m.map_q) {
    const size_t q_rows = ceil_div(args.seq_q, plan.q.rows), kv_rows = ceil_div(args.seq_kv, plan.kv.rows);
    for (size_t cols : {ceil_div(args.seq_kv, plan.q.cols) * q_rows, ceil_div(args.seq_q, plan.kv.cols) * kv_rows})
      rt::checked_product({int64_t(n_maps), int64_t(cols), 4}, "backward: the block map size");
    int32_t* q_tiles = alloc(n_maps * q_rows * ceil_div(args.seq_kv, plan.q.cols));
    int32_t* q_counts = alloc(n_maps * q_rows);
    int32_t* kv_tiles = alloc(n_maps * kv_rows * ceil_div(args.seq_q, plan.kv.cols));
    int32_t* kv_counts = alloc(n_maps * kv_rows);
    launch.set_maps(q_tiles, q_counts, kv_tiles, kv_counts);
  }
  auto tiles = [](int64_t n, int rows) { return static_cast<unsigned>((n + rows - 1) / rows); };
  auto run = [&](cu::CUfunction f, unsigned grid_x, int64_t heads, int threads, int smem, const char* what) {
    if (grid_x == 0) return;
    cu::check(d.cuLaunchKernel(f, grid_x, static_cast<unsigned>(heads), static_cast<unsigned>(args.batch),
                               static_cast<unsigned>(threads), 1, 1, static_cast<unsigned>(smem), stream,
                               launch.forward.slots.data(), nullptr),
              what);
  };
  if (log::enabled(log::Level::info))
    log::info("backward launch " + m.compiled.key + " " + m.compiled.config.str() + (plan.split_kv ? " (dK, dV split)" : ""));
  if (m.map_q) {
    run(m.map_q, tiles(args.seq_q, plan.q.rows), args.heads_q, kMapThreads, 0, "cuLaunchKernel(backward dQ block map)");
    run(m.map_kv, tiles(args.seq_kv, plan.kv.rows), args.heads_q, kMapThreads, 0,
        "cuLaunchKernel(backward dK/dV block map)");
  }
  run(m.prep, tiles(args.seq_q, kPrepRows), args.heads_q, kPrepThreads, 0, "cuLaunchKernel(backward D pre-pass)");
  const unsigned key_tiles = tiles(args.seq_kv, plan.kv.rows);
  run(m.loaded.function, key_tiles, args.heads_kv, plan.kv.threads, plan.kv.shared_bytes,
      "cuLaunchKernel(backward dK/dV)");
  if (m.dv) run(m.dv, key_tiles, args.heads_kv, plan.kv.threads, plan.kv.shared_bytes, "cuLaunchKernel(backward dV)");
  run(m.dq, tiles(args.seq_q, plan.q.rows), args.heads_q, plan.q.threads, plan.q.shared_bytes,
      "cuLaunchKernel(backward dQ)");
  cu::check(d.cuMemFreeAsync(delta, stream), "cuMemFreeAsync(backward workspace)");
  for (cu::CUdeviceptr p : maps) cu::check(d.cuMemFreeAsync(p, stream), "cuMemFreeAsync(backward block map)");
}

double Runtime::time_backward(const Kernel& kernel, const BackwardArgs& args, int warmup, int reps) const {
  return rt::median_ms(*detail::Access::context(*this, "time_backward"), static_cast<cu::CUstream>(args.stream), warmup,
                       reps, [&] { kernel.backward(args); });
}

}  // namespace flashjit

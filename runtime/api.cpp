// The public Runtime, Kernel and DeviceBuffer (include/flashjit/flashjit.hpp).
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "compiler/analyzed_spec.hpp"
#include "compiler/pipeline.hpp"
#include "flashjit/flashjit.hpp"
#include "runtime/assembler.hpp"
#include "runtime/backward.hpp"
#include "runtime/context.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/handles.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/launch.hpp"
#include "runtime/module.hpp"
#include "runtime/scratch.hpp"
#include "runtime/split_kv.hpp"
#include "runtime/tensor_map.hpp"
#include "runtime/timing.hpp"
#include "runtime/upgrade.hpp"
#include "support/knobs.hpp"
#include "support/log.hpp"
#include "support/text.hpp"

namespace flashjit {

Kernel::Impl::~Impl() {
  upgrade.reset();  // its compile may still be running: it ends before the module is unloaded
  rt::unload_module(*ctx, loaded);
}

const rt::CompiledModule* Kernel::Impl::full() const { return upgrade ? upgrade->ready() : nullptr; }

const Kernel::Impl& detail::Access::impl(const Kernel& k, const char* what) {
  if (!k.impl_)
    throw Error(ErrorKind::usage, std::string("flashjit::Kernel::") + what +
                                      ": this Kernel is empty (default-constructed or moved from); "
                                      "get one from Runtime::compile");
  return *k.impl_;
}

Runtime detail::Access::runtime(std::shared_ptr<rt::Context> ctx) {
  Runtime r;
  r.impl_ = std::make_shared<Runtime::Impl>();
  r.impl_->ctx = std::move(ctx);
  return r;
}

const std::shared_ptr<rt::Context>& detail::Access::context(const Runtime& r, const char* what) {
  if (!r.impl_)
    throw Error(ErrorKind::usage, std::string("flashjit::Runtime::") + what +
                                      ": this Runtime is empty (default-constructed or moved from); "
                                      "get one from Runtime::create");
  return r.impl_->ctx;
}

namespace rt {

Kernel compile_kernel(const std::shared_ptr<Context>& ctx, const KernelSource& source,
                      const std::optional<TileConfig>& config, const DispatchOptions& dispatch, bool tiered) {
  KernelRequest request;
  request.target = source.target;
  request.config = config;
  auto k = std::make_shared<detail::Access::KernelImpl>();
  k->ctx = ctx;
  k->spec = source.spec;
  k->source = source;
  k->dispatch_options = dispatch;
  PlannedKernel full = plan_kernel(source.spec, request);
  // Compile cache → (on a miss) LLVM + cuLink → loaded, registers/spills, dumps, the "loaded" log line.
  CompiledModule m;
  if (tiered && tiered_compile_allowed(source.stages)) {
    request.target.quick = true;
    PlannedKernel quick = plan_kernel(source.spec, request);
    if (quick.plan->quick()) {  // else the plan has no quick form: `quick` is `full`, key and all
      m = compile_and_load(*ctx, full, source.stages, /*cached_only=*/true);
      if (!m.loaded.module) {
        m = compile_and_load(*ctx, quick, source.stages);
        log::info("tiered compile: " + m.compiled.key + " (the quick form) serves " + source.spec->spec.name +
                  " until the full kernel " + full.key.hash + " has loaded");
        k->upgrade = std::make_unique<Upgrade>(ctx, std::move(full), source.stages);
      }
    }
  }
  if (!m.loaded.module) m = compile_and_load(*ctx, full, source.stages);
  k->compiled = std::move(m.compiled);
  k->loaded = m.loaded;
  k->registers = m.registers;
  k->spill_bytes = m.spill_bytes;
  k->dispatch = std::make_unique<KernelDispatch>(ctx, source, dispatch, &k->compiled, &k->loaded, k->upgrade.get());
  return detail::Access::wrap(std::move(k));
}

}  // namespace rt

Runtime Runtime::create(int device) {
  Runtime r;
  r.impl_ = std::make_shared<Impl>();
  r.impl_->ctx = rt::open_context(device);
  const DeviceInfo& info = r.impl_->ctx->info;
  if (info.arch().empty())
    throw Error(ErrorKind::no_gpu, "device " + std::to_string(device) + " (" + info.name + ") has compute capability " +
                                       std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor) +
                                       "; flashjit needs 8.0 or newer (mma.sync bf16, cp.async)");
  return r;
}

const DeviceInfo& Runtime::device() const { return detail::Access::context(*this, "device")->info; }

Kernel Runtime::compile(const AttentionSpec& spec, const CompileOptions& options) const {
  const std::shared_ptr<rt::Context>& ctx = detail::Access::context(*this, "compile");
  const DeviceInfo& info = ctx->info;
  rt::KernelSource source;
  source.target = rt::device_target(options, info);
  if (source.target.arch != info.arch())
    throw Error(ErrorKind::usage, "cannot load a kernel compiled for " + source.target.arch + " on " + info.name +
                                      " (" + info.arch() + "); leave CompileOptions::arch empty to use the device's");
  source.spec = analyze_spec(spec);
  source.stages = stage_options(options, /*keep_ir_default=*/false);  // a runtime kernel needs the PTX, not the IR text
  source.backward_config = options.backward_config;
  Kernel k = rt::compile_kernel(
      ctx, source, options.config,
      {options.autotune, options.tune_on_first_use, options.tune_deadline_s, options.config.has_value()},
      tiered_mode(options) == "on");
  if (options.backward) k.backward_compiled();
  return k;
}

const AttentionSpec& Kernel::spec() const { return detail::Access::impl(*this, "spec").spec->spec; }
const std::string& Kernel::canonical_spec() const {
  return detail::Access::impl(*this, "canonical_spec").spec->canonical;
}
const CompiledKernel& Kernel::compiled() const {
  const Impl& k = detail::Access::impl(*this, "compiled");
  const rt::CompiledModule* full = k.full();
  return full ? full->compiled : k.compiled;
}
int Kernel::registers() const {
  const Impl& k = detail::Access::impl(*this, "registers");
  const rt::CompiledModule* full = k.full();
  return full ? full->registers : k.registers;
}
int Kernel::spill_bytes() const {
  const Impl& k = detail::Access::impl(*this, "spill_bytes");
  const rt::CompiledModule* full = k.full();
  return full ? full->spill_bytes : k.spill_bytes;
}
void Kernel::wait_full() const {
  const Impl& k = detail::Access::impl(*this, "wait_full");
  if (k.upgrade) k.upgrade->wait();
}

namespace {

// The forward's map lists block_n-wide key tiles per block_m-high query tile.
std::vector<uint64_t> map_key(const ForwardArgs& a, const rt::ForwardLaunch& launch, size_t params,
                              const TileConfig& tile) {
  return rt::block_map_key(a, {tile.block_m, tile.block_n}, launch, params);
}

struct MapShape {
  size_t tiles_bytes, counts_bytes;
};

MapShape map_shape(const CompiledKernel& c, const ForwardArgs& a) {
  const size_t q_tiles = (a.seq_q + c.config.block_m - 1) / c.config.block_m;
  const size_t kv_tiles = (a.seq_kv + c.config.block_n - 1) / c.config.block_n;
  const int64_t maps = rt::checked_product({c.map_per_batch ? a.batch : 1, c.map_per_head ? a.heads_q : 1}, "forward: the block map size");
  const int64_t tiles = rt::checked_product({maps, int64_t(q_tiles), int64_t(kv_tiles), 4}, "forward: the block map size");
  return {std::max<size_t>(size_t(tiles), 4), std::max<size_t>(size_t(maps * int64_t(q_tiles) * 4), 4)};
}

// Checks `args` as forward() does, then: whether the call has output rows, and if so the module it
// launches — the shape bucket's kernel (tuned from the tuning cache or now, heuristic, or the given
// config) in the packed and/or split form the shape takes (runtime/split_kv.hpp). Varlen and paged
// calls take the bucket (and tuning) of the padded batch of their longest sequences; paged ones,
// that batch on a cache of their page size (ForwardArgs::page_size, kept for the bucket).
bool shape_of(const AnalyzedSpec& spec, const rt::Context& ctx, const rt::KernelDispatch& dispatch,
              const ForwardArgs& args, const char* call, rt::ForwardLaunch& launch, rt::ForwardShape& shape) {
  rt::pack_forward(spec, args, launch);
  {
    rt::ContextGuard guard(ctx);
    rt::check_stream(ctx, args.stream, call);  // before tuning or allocating on it
  }
  const bool varlen = args.cu_seqlens_q != nullptr;
  if (args.batch == 0 || args.seq_q == 0 || (varlen && args.max_seqlen_q == 0)) return false;
  ForwardArgs padded;
  const bool plain = !varlen && !args.block_table;
  if (!plain) {
    padded = args;
    if (varlen) padded.seq_q = args.max_seqlen_q, padded.seq_kv = args.max_seqlen_kv;
    padded.cu_seqlens_q = padded.cu_seqlens_kv = padded.block_table = padded.seqused_kv = nullptr;
    padded.max_pages_per_seq = 0;
  }
  shape = rt::shape_forward(dispatch, dispatch.select(plain ? args : padded), spec, ctx, args);
  return true;
}

// The attention kernel's grid: one CTA per (query tile × split, head, batch), or for a persistent
// kernel (CompiledKernel::persistent) one per SM, each walking tiles, while there are more tiles
// than SMs — the kernel's plan keeps it at one CTA per SM by shared memory.
struct Grid {
  unsigned x, y, z;
  int64_t tiles;
  bool persistent;
};

Grid forward_grid(const CompiledKernel& c, const rt::ForwardShape& shape, const ForwardArgs& args, const rt::Context& ctx) {
  const int64_t tiles = rt::checked_product({shape.q_tiles * shape.splits, shape.heads_y, args.batch}, "forward: the grid");
  static const bool allowed = knob::get("FLASHJIT_PERSISTENT") == "auto";
  // The kernel counts tiles in i32 and steps past the last by up to the grid's size.
  if (c.persistent && tiles > (int64_t(1) << 30))
    throw Error(ErrorKind::usage, "forward: " + std::to_string(tiles) + " tiles exceed the 2^30 a persistent kernel walks");
  if (c.persistent && allowed && tiles > ctx.info.sm_count)
    return {static_cast<unsigned>(ctx.info.sm_count), 1, 1, tiles, true};
  return {static_cast<unsigned>(shape.q_tiles * shape.splits), static_cast<unsigned>(shape.heads_y),
          static_cast<unsigned>(args.batch), tiles, false};
}

// The launch as FLASHJIT_LOG=info logs it and describe_launch() says it.
std::string launch_text(const rt::ForwardShape& shape, const ForwardArgs& args, const rt::Context& ctx) {
  const CompiledKernel& c = *shape.pick.compiled;
  const Grid g = forward_grid(c, shape, args, ctx);
  return c.key + " grid " + std::to_string(g.x) + "x" + std::to_string(g.y) + "x" + std::to_string(g.z) +
         (g.persistent ? " (persistent, " + std::to_string(g.tiles) + " tiles)" : "") + " block " +
         std::to_string(c.threads) + " smem " + std::to_string(c.shared_bytes) + " config " + c.config.str() + " (" + *shape.pick.why + ")" +
         (c.map_entry.empty() ? "" : args.block_map ? " + caller's block map" : " + block map built now") + shape.note;
}

}  // namespace

std::string Kernel::describe_launch(const ForwardArgs& args) const {
  const Impl& k = detail::Access::impl(*this, "describe_launch");
  rt::ForwardLaunch launch;
  rt::ForwardShape shape;
  if (!shape_of(*k.spec, *k.ctx, *k.dispatch, args, "describe_launch", launch, shape)) return "no launch: the call has no output rows";
  return launch_text(shape, args, *k.ctx);
}

void Kernel::forward(const ForwardArgs& args) const {
  const Impl& k = detail::Access::impl(*this, "forward");
  rt::ForwardLaunch launch;
  rt::ForwardShape shape;
  if (!shape_of(*k.spec, *k.ctx, *k.dispatch, args, "forward", launch, shape)) return;  // no output rows
  const bool varlen = args.cu_seqlens_q != nullptr;
  const rt::KernelDispatch::Choice& pick = shape.pick;
  const CompiledKernel& c = *pick.compiled;
  const rt::LoadedModule& loaded = *pick.loaded;
  const int splits = shape.splits;
  const int64_t heads_y = shape.heads_y, q_tiles = shape.q_tiles;
  if (splits > 1 && !loaded.combine_function)
    throw Error(ErrorKind::internal, "forward: kernel " + c.key + " has no split-KV combine kernel");
  unsigned grid_x = static_cast<unsigned>(q_tiles);
  auto stream = static_cast<cu::CUstream>(args.stream);
  rt::ContextGuard guard(*k.ctx);
  const cu::Driver& d = cu::driver();
  rt::StreamScratch scratch(*k.ctx, stream);  // after the guard: freed with the context current
  // Tensor maps (CompiledKernel::tensor_maps): encoded before anything is launched, since a stride
  // they cannot describe is the caller's error.
  std::array<cu::CUtensorMap, kMapMost> maps{};
  if (c.tensor_maps)
    maps = rt::encode_tensor_maps(c, args, k.spec->dsl.head_dim_qk, k.spec->dsl.head_dim_v,
                                  k.spec->spec.dtype == DType::f16);
  auto launch_map = [&] {
    rt::check_launch(d.cuLaunchKernel(loaded.map_function, grid_x, static_cast<unsigned>(heads_y),
                                      static_cast<unsigned>(args.batch), static_cast<unsigned>(c.threads), 1, 1, 0,
                                      stream, launch.slots.data(), nullptr),
                     "cuLaunchKernel(block map pre-pass)", args.stream);
  };
  // Split-KV's fp32 partial O and LSE: stream-ordered, freed after the combine kernel.
  if (splits > 1) {
    // Rows (split, batch, head, position); varlen: (split, head, token) over the packed tokens.
    const int64_t rows = rt::checked_product({splits, varlen ? 1 : args.batch, args.heads_q, args.seq_q},
                                             "forward: the split-KV workspace");
    const int64_t bytes = rt::checked_product({rows, k.spec->dsl.head_dim_v + 1, 4}, "forward: the split-KV workspace");
    const cu::CUdeviceptr partial = scratch.alloc(size_t(bytes), "split-KV partial O and LSE");
    launch.fixed.num_splits = splits;
    launch.fixed.partial_o = reinterpret_cast<float*>(partial);
    launch.fixed.partial_lse = reinterpret_cast<float*>(partial) + rows * k.spec->dsl.head_dim_v;
  }
  // Block map: the caller's (checked against this kernel and launch), else one built on the
  // stream right now in stream-ordered memory, freed after the forward kernel.
  cu::CUdeviceptr tiles = 0, counts = 0;
  bool own_map = false;
  if (!c.map_entry.empty()) {
    if (args.block_map) {
      const BlockMap::Impl* m = args.block_map->impl();
      if (m && m->backward)
        throw Error(ErrorKind::usage, "forward: block_map was built by build_backward_block_map; a forward "
                                      "call takes the map of this kernel's build_block_map");
      if (!m || m->kernel != &k || m->key != map_key(args, launch, k.spec->dsl.params.size(), c.config))
        throw Error(ErrorKind::usage, "forward: block_map was built for another kernel, sizes or params; "
                                      "build it with this kernel's build_block_map for these arguments");
      tiles = reinterpret_cast<cu::CUdeviceptr>(m->tiles.data());
      counts = reinterpret_cast<cu::CUdeviceptr>(m->counts.data());
    } else {
      MapShape shape = map_shape(c, args);
      tiles = scratch.alloc(shape.tiles_bytes, "forward block map");
      counts = scratch.alloc(shape.counts_bytes, "forward block map counts");
      own_map = true;
    }
    launch.slots.push_back(&tiles);
    launch.slots.push_back(&counts);
    if (own_map) launch_map();
  } else if (args.block_map) {
    throw Error(ErrorKind::usage, "forward: block_map given, but this kernel's mask has an exact closed form and no block map");
  }
  if (c.tensor_maps)  // last (templates/common/forward_abi.hpp); the driver copies them at the launch
    for (int m = 0; m < c.tensor_maps; ++m) launch.slots.push_back(&maps[size_t(m)]);
  if (log::enabled(log::Level::info)) log::info("launch " + launch_text(shape, args, *k.ctx));
  const Grid grid = forward_grid(c, shape, args, *k.ctx);
  launch.fixed.grid_heads = static_cast<int32_t>(heads_y);  // K/V heads where GQA groups are packed
  if (c.persistent) {  // its tile counter starts at zero (stream-ordered: graph capture records the memset)
    const cu::CUdeviceptr counter = scratch.alloc(4, "persistent tile counter");
    rt::check_launch(d.cuMemsetD32Async(counter, 0, 1, stream), "cuMemsetD32Async(persistent tile counter)", args.stream);
    launch.fixed.tile_counter = reinterpret_cast<int32_t*>(counter);
  }
  rt::check_launch(d.cuLaunchKernel(loaded.function, grid.x, grid.y, grid.z, static_cast<unsigned>(c.threads), 1, 1,
                                    c.shared_bytes, stream, launch.slots.data(), nullptr),
                   "cuLaunchKernel(attention forward)", args.stream);
  if (splits > 1) {
    // Varlen: the packed tokens as one sequence of batch 1 (o's batch stride is not used).
    cu::CUlaunchAttribute early{};
    early.id = cu::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    early.value.programmaticStreamSerializationAllowed = 1;
    cu::CUlaunchConfig cfg{static_cast<unsigned>(args.seq_q),
                           static_cast<unsigned>(args.heads_q),
                           static_cast<unsigned>(varlen ? 1 : args.batch),
                           kCombineThreads,
                           1,
                           1,
                           static_cast<unsigned>(kCombineSharedBytes(k.spec->dsl.head_dim_v)),
                           stream,
                           &early,
                           shape.combine_early ? 1u : 0u};
    rt::check_launch(d.cuLaunchKernelEx(&cfg, loaded.combine_function, launch.slots.data(), nullptr),
                     "cuLaunchKernelEx(split-KV combine)", args.stream);
  }
  scratch.free();
}

BlockMap Kernel::build_block_map(const ForwardArgs& args) const {
  const Impl& k = detail::Access::impl(*this, "build_block_map");
  rt::ForwardLaunch launch;
  rt::ForwardShape shape;
  // The module forward() will launch: a split form may tile differently from the bucket's kernel.
  const bool rows = shape_of(*k.spec, *k.ctx, *k.dispatch, args, "build_block_map", launch, shape);
  const rt::KernelDispatch::Choice pick = rows ? shape.pick : k.dispatch->select(args);
  const CompiledKernel& c = *pick.compiled;
  if (c.map_entry.empty())
    throw Error(ErrorKind::usage, "build_block_map: the mask of kernel " + c.key +
                                      " has an exact closed form; it needs no block map");
  auto m = std::make_shared<BlockMap::Impl>();
  m->kernel = &k;
  m->key = map_key(args, launch, k.spec->dsl.params.size(), c.config);
  const MapShape sizes = map_shape(c, args);
  const Runtime rt = detail::Access::runtime(k.ctx);  // the map's buffers live in the kernel's context
  m->tiles = rt.alloc(sizes.tiles_bytes);
  m->counts = rt.alloc(sizes.counts_bytes);
  rt::ContextGuard guard(*k.ctx);
  const cu::Driver& d = cu::driver();
  if (args.batch > 0 && args.seq_q > 0) {
    cu::CUdeviceptr tiles = reinterpret_cast<cu::CUdeviceptr>(m->tiles.data());
    cu::CUdeviceptr counts = reinterpret_cast<cu::CUdeviceptr>(m->counts.data());
    launch.slots.push_back(&tiles);
    launch.slots.push_back(&counts);
    const auto grid_x = static_cast<unsigned>((args.seq_q + c.config.block_m - 1) / c.config.block_m);
    rt::check_launch(d.cuLaunchKernel(pick.loaded->map_function, grid_x, static_cast<unsigned>(args.heads_q),
                                      static_cast<unsigned>(args.batch), static_cast<unsigned>(c.threads), 1, 1, 0,
                                      static_cast<cu::CUstream>(args.stream), launch.slots.data(), nullptr),
                     "cuLaunchKernel(block map pre-pass)", args.stream);
  }
  BlockMap map;
  map.impl_ = m;
  return map;
}

DeviceBuffer Runtime::alloc(size_t bytes) const {
  const std::shared_ptr<rt::Context>& ctx = detail::Access::context(*this, "alloc");
  rt::ContextGuard guard(*ctx);
  DeviceBuffer buf;
  cu::CUdeviceptr ptr = 0;
  cu::check_alloc(cu::driver().cuMemAlloc(&ptr, std::max<size_t>(bytes, 1)), "Runtime::alloc", bytes);
  buf.ctx_ = ctx;
  buf.ptr_ = reinterpret_cast<void*>(ptr);
  buf.bytes_ = bytes;
  return buf;
}

void Runtime::synchronize() const {
  rt::ContextGuard guard(*detail::Access::context(*this, "synchronize"));
  cu::check(cu::driver().cuCtxSynchronize(), "cuCtxSynchronize (a kernel failed)");
}

double Runtime::time_forward(const Kernel& kernel, const ForwardArgs& args, int warmup, int reps) const {
  kernel.wait_full();  // a tiered compile's full kernel, not its quick form
  return rt::median_ms(*detail::Access::context(*this, "time_forward"), static_cast<cu::CUstream>(args.stream), warmup,
                       reps, [&] { kernel.forward(args); });
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  const cu::Driver& d = cu::driver();
  cu::CUcontext popped = nullptr;
  if (d.cuCtxPushCurrent(static_cast<rt::Context*>(ctx_.get())->ctx) != cu::CUDA_SUCCESS) return;
  d.cuMemFree(reinterpret_cast<cu::CUdeviceptr>(ptr_));
  d.cuCtxPopCurrent(&popped);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ctx_(std::move(o.ctx_)), ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    DeviceBuffer tmp(std::move(*this));
    ctx_ = std::move(o.ctx_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes) {
  if (bytes > bytes_) throw Error(ErrorKind::usage, "upload of " + std::to_string(bytes) + " bytes into a buffer of " + std::to_string(bytes_));
  rt::ContextGuard guard(*static_cast<rt::Context*>(ctx_.get()));
  cu::check(cu::driver().cuMemcpyHtoD(reinterpret_cast<cu::CUdeviceptr>(ptr_), host, bytes), "cuMemcpyHtoD");
}

void DeviceBuffer::download(void* host, size_t bytes) const {
  if (bytes > bytes_) throw Error(ErrorKind::usage, "download of " + std::to_string(bytes) + " bytes from a buffer of " + std::to_string(bytes_));
  rt::ContextGuard guard(*static_cast<rt::Context*>(ctx_.get()));
  cu::check(cu::driver().cuMemcpyDtoH(host, reinterpret_cast<cu::CUdeviceptr>(ptr_), bytes), "cuMemcpyDtoH");
}

void DeviceBuffer::fill_bytes(unsigned char value) {
  rt::ContextGuard guard(*static_cast<rt::Context*>(ctx_.get()));
  cu::check(cu::driver().cuMemsetD8(reinterpret_cast<cu::CUdeviceptr>(ptr_), value, bytes_), "cuMemsetD8");
}

}  // namespace flashjit

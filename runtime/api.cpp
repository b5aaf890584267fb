// The public Runtime, Kernel and DeviceBuffer (include/flashjit/flashjit.hpp).
#include <algorithm>
#include <cstdlib>
#include <vector>

#include "compiler/dsl/kv_range.hpp"
#include "compiler/spec_bridge.hpp"
#include "flashjit/flashjit.hpp"
#include "runtime/context.hpp"
#include "runtime/launch.hpp"
#include "runtime/module.hpp"
#include "support/knobs.hpp"
#include "support/log.hpp"
#include "support/text.hpp"

namespace flashjit {

struct Runtime::Impl {
  std::shared_ptr<rt::Context> ctx;
};

struct Kernel::Impl {
  std::shared_ptr<rt::Context> ctx;
  AttentionSpec spec;
  dsl::Spec dsl;             // params and tensors by slot, for launch packing and checks
  dsl::KvRange kv_range;     // the mask's closed form, checked for i32 wrap-around per launch
  CompiledKernel compiled;
  rt::LoadedModule loaded;
  int registers = 0, spill_bytes = 0;
  ~Impl() {
    // Destructors never throw: the driver is known loaded here, and failures only leak.
    if (!loaded.module) return;
    const cu::Driver& d = cu::driver();
    cu::CUcontext popped = nullptr;
    if (d.cuCtxPushCurrent(ctx->ctx) != cu::CUDA_SUCCESS) return;
    d.cuModuleUnload(loaded.module);
    d.cuCtxPopCurrent(&popped);
  }
};

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

const DeviceInfo& Runtime::device() const { return impl_->ctx->info; }

Kernel Runtime::compile(const AttentionSpec& spec, const CompileOptions& options) const {
  CompileOptions opts = options;
  const DeviceInfo& info = impl_->ctx->info;
  if (opts.arch.empty()) opts.arch = info.arch();
  if (opts.arch != info.arch())
    throw Error(ErrorKind::usage, "cannot load a kernel compiled for " + opts.arch + " on " + info.name + " (" +
                                      info.arch() + "); leave CompileOptions::arch empty to use the device's");
  auto k = std::make_shared<Kernel::Impl>();
  k->ctx = impl_->ctx;
  k->spec = spec;
  k->dsl = to_dsl(spec);
  if (k->dsl.mask) k->kv_range = dsl::derive_kv_range(k->dsl.mask, &k->dsl.tensors);
  k->compiled = compile_to_ptx(spec, opts);
  if (k->compiled.shared_bytes > info.shared_per_block_optin)
    throw Error(ErrorKind::spec, "kernel " + k->compiled.key + " needs " + std::to_string(k->compiled.shared_bytes) +
                                     " bytes of shared memory; " + info.name + " allows " +
                                     std::to_string(info.shared_per_block_optin) + " per block");
  rt::ContextGuard guard(*impl_->ctx);
  k->loaded = rt::load_module(k->compiled.ptx, k->compiled.entry);
  const cu::Driver& d = cu::driver();
  // Over 48 KB of dynamic shared memory must be opted into per function (CUDA Programming Guide §7.36).
  if (k->compiled.shared_bytes > 48 * 1024)
    cu::check(d.cuFuncSetAttribute(k->loaded.function, cu::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   k->compiled.shared_bytes),
              "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  cu::check(d.cuFuncGetAttribute(&k->registers, cu::CU_FUNC_ATTRIBUTE_NUM_REGS, k->loaded.function), "cuFuncGetAttribute");
  cu::check(d.cuFuncGetAttribute(&k->spill_bytes, cu::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k->loaded.function),
            "cuFuncGetAttribute");
  if (std::string dir = opts.dump_dir ? *opts.dump_dir : knob::get("FLASHJIT_DUMP_DIR"); !dir.empty()) {
    write_file_atomic(dir + "/" + k->compiled.key + "/cubin.cubin", k->loaded.cubin);
    write_file_atomic(dir + "/" + k->compiled.key + "/module.txt", k->loaded.jit_log + "\n");
  }
  log::info("loaded " + k->compiled.key + " on " + info.name + ": " + std::to_string(k->registers) + " registers, " +
            std::to_string(k->spill_bytes) + " bytes local memory, cuLink " + std::to_string(k->loaded.link_ms) +
            " ms, load " + std::to_string(k->loaded.load_ms) + " ms");
  Kernel kernel;
  kernel.impl_ = k;
  return kernel;
}

const AttentionSpec& Kernel::spec() const { return impl_->spec; }
const CompiledKernel& Kernel::compiled() const { return impl_->compiled; }
int Kernel::registers() const { return impl_->registers; }
int Kernel::spill_bytes() const { return impl_->spill_bytes; }

void Kernel::forward(const ForwardArgs& args) const {
  const Impl& k = *impl_;
  rt::ForwardLaunch launch;
  rt::pack_forward(k.dsl, k.dsl.mask ? &k.kv_range : nullptr, args, launch);
  if (args.batch == 0 || args.seq_q == 0) return;  // an empty output: nothing to write
  const auto grid_x = static_cast<unsigned>((args.seq_q + k.compiled.config.block_m - 1) / k.compiled.config.block_m);
  if (log::enabled(log::Level::info))
    log::info("launch " + k.compiled.key + " grid " + std::to_string(grid_x) + "x" + std::to_string(args.heads_q) +
              "x" + std::to_string(args.batch) + " block " + std::to_string(k.compiled.threads) + " smem " +
              std::to_string(k.compiled.shared_bytes) + " config " + k.compiled.config.str() + " (" +
              k.compiled.config_reason + ")");
  rt::ContextGuard guard(*k.ctx);
  const cu::Driver& d = cu::driver();
  cu::check(d.cuLaunchKernel(k.loaded.function, grid_x, static_cast<unsigned>(args.heads_q),
                             static_cast<unsigned>(args.batch), static_cast<unsigned>(k.compiled.threads), 1, 1,
                             static_cast<unsigned>(k.compiled.shared_bytes), static_cast<cu::CUstream>(args.stream),
                             launch.slots.data(), nullptr),
            "cuLaunchKernel(attention forward)");
}

DeviceBuffer Runtime::alloc(size_t bytes) const {
  rt::ContextGuard guard(*impl_->ctx);
  DeviceBuffer buf;
  cu::CUdeviceptr ptr = 0;
  cu::check(cu::driver().cuMemAlloc(&ptr, std::max<size_t>(bytes, 1)), "cuMemAlloc");
  buf.ctx_ = impl_->ctx;
  buf.ptr_ = reinterpret_cast<void*>(ptr);
  buf.bytes_ = bytes;
  return buf;
}

void Runtime::synchronize() const {
  rt::ContextGuard guard(*impl_->ctx);
  cu::check(cu::driver().cuCtxSynchronize(), "cuCtxSynchronize (a kernel failed)");
}

double Runtime::time_forward(const Kernel& kernel, const ForwardArgs& args, int warmup, int reps) const {
  rt::ContextGuard guard(*impl_->ctx);
  const cu::Driver& d = cu::driver();
  auto stream = static_cast<cu::CUstream>(args.stream);
  for (int i = 0; i < warmup; ++i) kernel.forward(args);
  cu::CUevent start = nullptr, stop = nullptr;
  cu::check(d.cuEventCreate(&start, cu::CU_EVENT_DEFAULT), "cuEventCreate");
  cu::check(d.cuEventCreate(&stop, cu::CU_EVENT_DEFAULT), "cuEventCreate");
  std::vector<float> ms;
  for (int i = 0; i < std::max(reps, 1); ++i) {
    cu::check(d.cuEventRecord(start, stream), "cuEventRecord");
    kernel.forward(args);
    cu::check(d.cuEventRecord(stop, stream), "cuEventRecord");
    cu::check(d.cuEventSynchronize(stop), "cuEventSynchronize (a kernel failed)");
    float t = 0;
    cu::check(d.cuEventElapsedTime(&t, start, stop), "cuEventElapsedTime");
    ms.push_back(t);
  }
  d.cuEventDestroy(start);
  d.cuEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
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

std::string cache_dir() {
  if (const std::string& v = knob::get("FLASHJIT_CACHE_DIR"); !v.empty()) return v;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/flashjit";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/flashjit";
  return ".flashjit-cache";
}

}  // namespace flashjit

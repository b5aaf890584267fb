// The C ABI (include/flashjit/flashjit.h) over the C++ API: argument checks naming the argument,
// flashjit::ErrorKind → fj_status, a per-thread last-error string, and no exception ever crossing.
#include "flashjit/flashjit.h"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>

#include "flashjit/flashjit.hpp"

struct fj_runtime {
  flashjit::Runtime runtime;
};

struct fj_kernel {
  flashjit::Kernel kernel;
};

struct fj_block_map {
  flashjit::BlockMap map;
};

namespace {

// The first published layouts end at these fields: callers compiled against them must keep
// working forever, so these stay put when fields are appended (sizeof grows, these do not).
constexpr size_t kForwardArgsV1Size = offsetof(fj_forward_args, stream) + sizeof(void*);
constexpr size_t kKernelInfoV1Size = offsetof(fj_kernel_info, head_dim_v) + sizeof(int);
constexpr size_t kBackwardArgsV1Size = offsetof(fj_backward_args, deterministic) + sizeof(int);
static_assert(kForwardArgsV1Size <= sizeof(fj_forward_args) && kKernelInfoV1Size <= sizeof(fj_kernel_info) &&
              kBackwardArgsV1Size <= sizeof(fj_backward_args));

// Per-thread last error. `fixed` is used when even storing the message fails (out of memory).
thread_local std::string t_message;
thread_local const char* t_fixed = nullptr;

void clear_error() noexcept {
  t_message.clear();
  t_fixed = nullptr;
}

fj_status fail(fj_status status, const char* a, const char* b = "", const char* c = "") noexcept {
  try {
    t_fixed = nullptr;
    t_message.assign(a);
    t_message.append(b);
    t_message.append(c);
  } catch (...) {
    t_message.clear();
    t_fixed = "flashjit: out of host memory while reporting an error";
  }
  return status;
}

// A bad argument detected by this layer; becomes FJ_ERR_USAGE.
struct UsageError {
  std::string message;
};

[[noreturn]] void usage(std::string message) { throw UsageError{std::move(message)}; }

template <class T>
void require(const T* p, const char* fn, const char* name) {
  if (!p) usage(std::string(fn) + ": " + name + " is NULL");
}

fj_status status_of(flashjit::ErrorKind kind) {
  switch (kind) {
    case flashjit::ErrorKind::spec: return FJ_ERR_SPEC;
    case flashjit::ErrorKind::usage: return FJ_ERR_USAGE;
    case flashjit::ErrorKind::no_gpu: return FJ_ERR_NO_GPU;
    case flashjit::ErrorKind::cuda: return FJ_ERR_CUDA;
    case flashjit::ErrorKind::compile: return FJ_ERR_INTERNAL;  // generated code was rejected: our bug
    case flashjit::ErrorKind::internal: return FJ_ERR_INTERNAL;
    case flashjit::ErrorKind::out_of_memory: return FJ_ERR_OUT_OF_MEMORY;
  }
  return FJ_ERR_INTERNAL;
}

// Runs `body`, turning every exception into a status and a message for fj_last_error().
template <class Fn>
fj_status guarded(const char* fn, Fn&& body) noexcept {
  try {
    clear_error();
    body();
    return FJ_OK;
  } catch (const UsageError& e) {
    return fail(FJ_ERR_USAGE, e.message.c_str());
  } catch (const flashjit::Error& e) {
    return fail(status_of(e.kind()), e.what());
  } catch (const std::bad_alloc&) {
    return fail(FJ_ERROR, fn, ": out of host memory");
  } catch (const std::exception& e) {
    return fail(FJ_ERR_INTERNAL, fn,
                ": internal error (this is a flashjit bug; please report it with the spec and FLASHJIT_LOG=debug "
                "output): ",
                e.what());
  } catch (...) {
    return fail(FJ_ERR_INTERNAL, fn,
                ": internal error: an unknown exception (this is a flashjit bug; please report it with the spec and "
                "FLASHJIT_LOG=debug output)");
  }
}

// Copies a caller's versioned struct: at least the first version's size, only the known prefix
// read, and anything past the known prefix must be zero (an unknown feature is never ignored).
template <class T>
T read_versioned(const T* in, size_t v1_size, const char* fn, const char* name, const char* type) {
  const size_t given = in->struct_size;
  if (given < v1_size)
    usage(std::string(fn) + ": " + name + "->struct_size is " + std::to_string(given) + "; it must be at least " +
          std::to_string(v1_size) + " (set it to sizeof(" + type + "))");
  T out;
  std::memset(&out, 0, sizeof(T));  // fields newer than the caller's struct read as zero
  std::memcpy(&out, in, given < sizeof(T) ? given : sizeof(T));
  const auto* bytes = reinterpret_cast<const unsigned char*>(in);
  for (size_t i = sizeof(T); i < given; ++i)
    if (bytes[i] != 0)
      usage(std::string(fn) + ": " + name + "->struct_size is " + std::to_string(given) + " and byte " +
            std::to_string(i) + " is set, but this libflashjit (" + FLASHJIT_VERSION + ") knows only the first " +
            std::to_string(sizeof(T)) + " bytes; the caller asks for a feature this library does not have");
  return out;
}

flashjit::Tensor tensor(const fj_tensor& t) {
  flashjit::Tensor out;
  out.data = t.data;
  for (int i = 0; i < 4; ++i) out.stride[i] = t.stride[i];
  return out;
}

char* copy_string(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) throw std::bad_alloc();
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

}  // namespace

extern "C" {

FJ_API const char* fj_last_error(void) { return t_fixed ? t_fixed : t_message.c_str(); }

FJ_API const char* fj_status_name(fj_status status) {
  switch (status) {
    case FJ_OK: return "FJ_OK";
    case FJ_ERROR: return "FJ_ERROR";
    case FJ_ERR_SPEC: return "FJ_ERR_SPEC";
    case FJ_ERR_USAGE: return "FJ_ERR_USAGE";
    case FJ_ERR_CUDA: return "FJ_ERR_CUDA";
    case FJ_ERR_OUT_OF_MEMORY: return "FJ_ERR_OUT_OF_MEMORY";
    case FJ_ERR_NO_GPU: return "FJ_ERR_NO_GPU";
    case FJ_ERR_INTERNAL: return "FJ_ERR_INTERNAL";
  }
  return "FJ_UNKNOWN_STATUS";
}

FJ_API const char* fj_version(void) { return FLASHJIT_VERSION; }

FJ_API void fj_free(void* p) { std::free(p); }

FJ_API fj_status fj_compile_ptx(const char* spec_yaml, const char* arch, char** ptx_out, char** entry_out) {
  if (ptx_out) *ptx_out = nullptr;
  if (entry_out) *entry_out = nullptr;
  return guarded("fj_compile_ptx", [&] {
    require(spec_yaml, "fj_compile_ptx", "spec_yaml");
    require(ptx_out, "fj_compile_ptx", "ptx_out");
    flashjit::AttentionSpec spec = flashjit::AttentionSpec::from_yaml(spec_yaml);
    flashjit::CompileOptions options;
    options.arch = arch ? arch : "";
    flashjit::CompiledKernel compiled = flashjit::compile_to_ptx(spec, options);
    char* ptx = copy_string(compiled.ptx);
    char* entry = nullptr;
    if (entry_out) {
      try {
        entry = copy_string(compiled.entry);
      } catch (...) {
        std::free(ptx);
        throw;
      }
    }
    *ptx_out = ptx;
    if (entry_out) *entry_out = entry;
  });
}

FJ_API fj_status fj_runtime_create(int device, fj_runtime** out) {
  if (out) *out = nullptr;
  return guarded("fj_runtime_create", [&] {
    require(out, "fj_runtime_create", "out");
    *out = new fj_runtime{flashjit::Runtime::create(device)};
  });
}

FJ_API void fj_runtime_destroy(fj_runtime* runtime) { delete runtime; }

FJ_API fj_status fj_compile(fj_runtime* runtime, const char* spec_yaml, fj_kernel** out) {
  if (out) *out = nullptr;
  return guarded("fj_compile", [&] {
    require(runtime, "fj_compile", "runtime");
    require(spec_yaml, "fj_compile", "spec_yaml");
    require(out, "fj_compile", "out");
    flashjit::AttentionSpec spec = flashjit::AttentionSpec::from_yaml(spec_yaml);
    *out = new fj_kernel{runtime->runtime.compile(spec)};
  });
}

FJ_API void fj_kernel_destroy(fj_kernel* kernel) { delete kernel; }

FJ_API fj_status fj_kernel_wait_full(const fj_kernel* kernel) {
  return guarded("fj_kernel_wait_full", [&] {
    require(kernel, "fj_kernel_wait_full", "kernel");
    kernel->kernel.wait_full();
  });
}

FJ_API fj_status fj_kernel_get_info(const fj_kernel* kernel, fj_kernel_info* out) {
  return guarded("fj_kernel_get_info", [&] {
    require(out, "fj_kernel_get_info", "out");
    const size_t given = out->struct_size;
    if (given < kKernelInfoV1Size)
      usage("fj_kernel_get_info: out->struct_size is " + std::to_string(given) + "; it must be at least " +
            std::to_string(kKernelInfoV1Size) + " (set it to sizeof(fj_kernel_info))");
    require(kernel, "fj_kernel_get_info", "kernel");
    const flashjit::CompiledKernel& c = kernel->kernel.compiled();
    const flashjit::AttentionSpec& s = kernel->kernel.spec();
    fj_kernel_info info{};
    info.struct_size = given;
    info.key = c.key.c_str();
    info.entry = c.entry.c_str();
    info.description = c.description.c_str();
    info.arch = c.arch.c_str();
    info.config_reason = c.config_reason.c_str();
    info.spec = kernel->kernel.canonical_spec().c_str();
    info.ptx = c.ptx.c_str();
    info.block_m = c.config.block_m;
    info.block_n = c.config.block_n;
    info.num_warps = c.config.num_warps;
    info.num_stages = c.config.num_stages;
    info.threads = c.threads;
    info.shared_bytes = c.shared_bytes;
    info.registers = kernel->kernel.registers();
    info.spill_bytes = kernel->kernel.spill_bytes();
    info.head_dim_qk = s.head_dim_qk;
    info.head_dim_v = s.head_dim_v;
    // An older caller gets the prefix it knows; a newer one reads the fields this library
    // does not know as zero.
    if (given > sizeof info) std::memset(reinterpret_cast<unsigned char*>(out) + sizeof info, 0, given - sizeof info);
    std::memcpy(out, &info, given < sizeof info ? given : sizeof info);
  });
}

}  // extern "C"

namespace {

// The sizes, params and buffers that fj_forward_args and fj_backward_args share, into their C++
// counterparts (`where` names the caller in messages).
template <class CArgs, class Args>
void convert_common(const CArgs& a, const std::string& where, Args& f) {
  f.batch = a.batch;
  f.seq_q = a.seq_q;
  f.seq_kv = a.seq_kv;
  f.heads_q = a.heads_q;
  f.heads_kv = a.heads_kv;
  f.q = tensor(a.q);
  f.k = tensor(a.k);
  f.v = tensor(a.v);
  f.o = tensor(a.o);
  f.scale = a.scale;
  f.stream = a.stream;
  if (a.num_params < 0) usage(where + ": args->num_params is " + std::to_string(a.num_params) + "; it must be >= 0");
  if (a.num_params > 0 && !a.params)
    usage(where + ": args->params is NULL but args->num_params is " + std::to_string(a.num_params));
  for (int i = 0; i < a.num_params; ++i) {
    if (!a.params[i].name) usage(where + ": args->params[" + std::to_string(i) + "].name is NULL");
    f.params.push_back({a.params[i].name, a.params[i].value});
  }
  if (a.num_buffers < 0) usage(where + ": args->num_buffers is " + std::to_string(a.num_buffers) + "; it must be >= 0");
  if (a.num_buffers > 0 && !a.buffers)
    usage(where + ": args->buffers is NULL but args->num_buffers is " + std::to_string(a.num_buffers));
  for (int i = 0; i < a.num_buffers; ++i) {
    const fj_buffer& b = a.buffers[i];
    // Only what C++ cannot represent is checked here; data and numel are checked by
    // Kernel::forward against the spec's declaration (one set of rules for both APIs).
    if (!b.name) usage(where + ": args->buffers[" + std::to_string(i) + "].name is NULL");
    f.buffers.push_back({b.name, b.data, b.numel});
  }
}

// The C++ arguments of a checked fj_forward_args (fn names the caller in messages).
flashjit::ForwardArgs forward_args(const fj_forward_args& a, const char* fn) {
  flashjit::ForwardArgs f;
  convert_common(a, fn, f);
  f.lse = a.lse;
  if (a.block_map) f.block_map = &a.block_map->map;
  f.num_splits = a.num_splits;
  f.cu_seqlens_q = a.cu_seqlens_q;
  f.cu_seqlens_kv = a.cu_seqlens_kv;
  f.max_seqlen_q = a.max_seqlen_q;
  f.max_seqlen_kv = a.max_seqlen_kv;
  f.block_table = a.block_table;
  f.page_size = a.page_size;
  f.max_pages_per_seq = a.max_pages_per_seq;
  f.seqused_kv = a.seqused_kv;
  return f;
}

flashjit::BackwardArgs backward_args(const fj_backward_args& a) {
  flashjit::BackwardArgs b;
  convert_common(a, "fj_backward", b);
  b.d_o = tensor(a.d_o);
  b.dq = tensor(a.dq);
  b.dk = tensor(a.dk);
  b.dv = tensor(a.dv);
  b.lse = a.lse;
  b.deterministic = a.deterministic != 0;
  if (a.block_map) b.block_map = &a.block_map->map;
  return b;
}

}  // namespace

extern "C" {

FJ_API fj_status fj_forward(const fj_kernel* kernel, const fj_forward_args* args) {
  return guarded("fj_forward", [&] {
    // The argument struct is checked first so its version errors are reported even for a NULL kernel.
    require(args, "fj_forward", "args");
    const fj_forward_args a = read_versioned(args, kForwardArgsV1Size, "fj_forward", "args", "fj_forward_args");
    require(kernel, "fj_forward", "kernel");
    kernel->kernel.forward(forward_args(a, "fj_forward"));
  });
}

FJ_API fj_status fj_block_map_build(const fj_kernel* kernel, const fj_forward_args* args, fj_block_map** out) {
  if (out) *out = nullptr;
  return guarded("fj_block_map_build", [&] {
    require(args, "fj_block_map_build", "args");
    const fj_forward_args a =
        read_versioned(args, kForwardArgsV1Size, "fj_block_map_build", "args", "fj_forward_args");
    require(kernel, "fj_block_map_build", "kernel");
    require(out, "fj_block_map_build", "out");
    if (a.block_map) usage("fj_block_map_build: args->block_map must be NULL (a map is built from the tensors)");
    auto* m = new fj_block_map{kernel->kernel.build_block_map(forward_args(a, "fj_block_map_build"))};
    *out = m;
  });
}

FJ_API void fj_block_map_destroy(fj_block_map* map) { delete map; }

FJ_API fj_status fj_backward(const fj_kernel* kernel, const fj_backward_args* args) {
  return guarded("fj_backward", [&] {
    // As fj_forward: the struct's version, then its required pointer, before the kernel, so a
    // caller's struct errors are reported even for a NULL kernel.
    require(args, "fj_backward", "args");
    const fj_backward_args a = read_versioned(args, kBackwardArgsV1Size, "fj_backward", "args", "fj_backward_args");
    if (!a.lse)
      usage("fj_backward: args->lse is NULL; it is required: the forward's [batch, heads_q, seq_q] fp32 log-sum-exp "
            "(fj_forward_args::lse)");
    require(kernel, "fj_backward", "kernel");
    kernel->kernel.backward(backward_args(a));
  });
}

FJ_API fj_status fj_backward_block_map_build(const fj_kernel* kernel, const fj_backward_args* args,
                                             fj_block_map** out) {
  if (out) *out = nullptr;
  return guarded("fj_backward_block_map_build", [&] {
    require(args, "fj_backward_block_map_build", "args");
    const fj_backward_args a = read_versioned(args, kBackwardArgsV1Size, "fj_backward_block_map_build", "args",
                                              "fj_backward_args");
    require(kernel, "fj_backward_block_map_build", "kernel");
    require(out, "fj_backward_block_map_build", "out");
    if (a.block_map)
      usage("fj_backward_block_map_build: args->block_map must be NULL (a map is built from the tensors)");
    if (!a.lse)
      usage("fj_backward_block_map_build: args->lse is NULL; it is required, as by fj_backward");
    *out = new fj_block_map{kernel->kernel.build_backward_block_map(backward_args(a))};
  });
}

}  // extern "C"

#include "runtime/kernel_cache.hpp"

#include <pwd.h>
#include <unistd.h>

#include "flashjit/tuning.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "autotune/compile_cache.hpp"
#include "autotune/kernel_entry.hpp"
#include "support/atomic_file.hpp"
#include "support/hash.hpp"
#include "support/knobs.hpp"
#include "support/log.hpp"

namespace flashjit {
namespace rt {
namespace {

struct Counters {
  std::atomic<uint64_t> hits{0}, misses{0}, stores{0}, store_failures{0}, bypasses{0}, llvm_compiles{0};
};
Counters& counters() {
  static Counters c;
  return c;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string short_hash(const std::string& h) { return h.substr(0, 16); }

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

}  // namespace

uint64_t compile_cache_max_bytes() {
  const std::string& v = knob::get("FLASHJIT_CACHE_MAX_BYTES");
  return v.empty() ? autotune::kDefaultCompileCacheBytes : autotune::parse_byte_size(v, "FLASHJIT_CACHE_MAX_BYTES");
}

std::string compile_cache_key(const KernelKey& key, int driver_version, const std::string& assembler) {
  // The driver's JIT keeps the key it always had, so existing entries stay valid.
  const std::string as = assembler.empty() || assembler == "driver" ? "" : "assembler=" + assembler + "\n";
  return "driver=" + std::to_string(driver_version) + "\n" + as + key.text;
}

KernelBuild build_kernel(const PlannedKernel& planned, const StageOptions& stages, const KernelCacheSettings& settings,
                         const Linker& link, const std::function<void()>& before_llvm) {
  Counters& n = counters();
  KernelBuild b;
  const std::string config = planned.config.str();
  auto compile = [&] {
    ++n.llvm_compiles;
    if (link && before_llvm) before_llvm();
    b.compiled = compile_planned(planned, stages);
    if (link) {
      LinkResult l = link(b.compiled);
      b.cubin = std::move(l.cubin);
      b.registers = l.registers;
      b.spill_bytes = l.spill_bytes;
      b.linked = true;
    }
  };

  // When the cache must not be used, and why (said at info level: never silently).
  std::string bypass;
  if (!settings.enabled) bypass = "disabled by the caller";
  else if (!stages.override_dir.empty()) bypass = "FLASHJIT_OVERRIDE_DIR is set (stage files may replace generated code)";
  if (!bypass.empty() && !settings.compile) return b;
  if (!bypass.empty()) {
    ++n.bypasses;
    log::info("compile cache bypassed for " + planned.spec->spec.name + " " + config + ": " + bypass);
    compile();
    b.cache_status = "bypassed: " + bypass;
    return b;
  }

  b.key_text = compile_cache_key(planned.key, settings.driver_version, settings.assembler);
  b.key_hash = autotune::CompileCache::hash_key(b.key_text);
  std::optional<autotune::CompileCache> cache;
  try {
    cache.emplace(settings.root.empty() ? cache_dir() : settings.root,
                  settings.max_bytes ? *settings.max_bytes : compile_cache_max_bytes());
  } catch (const std::exception& e) {
    if (!settings.compile) return b;  // the compile that follows says it
    log::warn(std::string("compile cache unavailable, compiling without it: ") + e.what());
    ++n.bypasses;
    compile();
    b.cache_status = std::string("bypassed: ") + e.what();
    return b;
  }

  const bool read = stages.dump_dir.empty() && settings.read;  // a dump wants every stage: compile, but still store
  const auto t0 = std::chrono::steady_clock::now();
  if (read) {
    std::optional<autotune::KernelArtifacts> a = cache->get(b.key_text);
    if (a && a->cubin.empty() && !settings.compile) return b;  // stored compile-only: linking is compiling
    if (a) {
      b.compiled = planned.describe();
      if (b.compiled.entry != a->entry || b.compiled.threads != a->threads || b.compiled.shared_bytes != a->shared_bytes)
        throw Error(ErrorKind::internal, "internal error: compile cache entry " + b.key_hash + " holds " + a->entry + " (" +
                                             std::to_string(a->threads) + " threads, " + std::to_string(a->shared_bytes) +
                                             " B shared) where the plan says " + b.compiled.entry + " (" +
                                             std::to_string(b.compiled.threads) + ", " +
                                             std::to_string(b.compiled.shared_bytes) + "): a template changed "
                                             "without a version bump (a flashjit bug)");
      b.compiled.ptx = a->ptx;
      b.cubin = std::move(a->cubin);
      b.registers = a->registers;
      b.spill_bytes = a->spill_bytes;
      b.cache_hit = true;
      ++n.hits;
      b.cache_status = "hit " + short_hash(b.key_hash);
      log::debug("compile cache hit " + b.key_hash + " (" + b.compiled.key + " " + config + ", " +
                 std::to_string(ms_since(t0)) + " ms)");
      if (!b.cubin.empty() || !link) return b;
      // Stored compile-only (no cubin): link now and complete the entry.
      LinkResult l = link(b.compiled);
      b.cubin = std::move(l.cubin);
      b.registers = l.registers;
      b.spill_bytes = l.spill_bytes;
      b.linked = true;
      a->cubin = b.cubin;
      a->registers = b.registers;
      a->spill_bytes = b.spill_bytes;
      a->created_unix = 0;
      if (cache->put(b.key_text, std::move(*a))) ++n.stores;
      else ++n.store_failures;
      b.cache_status += " (cubin linked now and stored)";
      return b;
    }
  }
  if (!settings.compile) return b;  // not counted: the compile that follows counts its miss
  ++n.misses;
  compile();
  autotune::KernelArtifacts a;
  a.entry = b.compiled.entry;
  a.threads = b.compiled.threads;
  a.shared_bytes = b.compiled.shared_bytes;
  a.registers = b.registers;
  a.spill_bytes = b.spill_bytes;
  a.ptx = b.compiled.ptx;
  a.cubin = b.cubin;
  bool stored = false;
  try {
    stored = cache->put(b.key_text, std::move(a));  // logs its own warning on failure
  } catch (const std::exception& e) {
    log::warn(std::string("compile cache: could not store ") + b.compiled.key + ": " + e.what() +
              " (the kernel is fine; only the cache missed the write)");
  }
  stored ? ++n.stores : ++n.store_failures;
  b.cache_status = std::string(read ? "miss" : "read skipped (FLASHJIT_DUMP_DIR is set)") +
                   (stored ? ", stored " : ", not stored ") + short_hash(b.key_hash);
  log::debug("compile cache " + b.cache_status + " (" + b.compiled.key + " " + config + ")");
  return b;
}

KernelCacheCounters kernel_cache_counters() {
  Counters& n = counters();
  KernelCacheCounters c;
  c.hits = n.hits;
  c.misses = n.misses;
  c.stores = n.stores;
  c.store_failures = n.store_failures;
  c.bypasses = n.bypasses;
  c.llvm_compiles = n.llvm_compiles;
  return c;
}

namespace {

// cuModuleLoadData of a cached cubin; the function handles as load_module gives them.
LoadedModule load_cubin(const std::string& cubin, const CompiledKernel& c) {
  LoadedModule out;
  const auto t0 = std::chrono::steady_clock::now();
  out.cubin = cubin;
  load_functions(out, c);
  out.load_ms = ms_since(t0);
  return out;
}

}  // namespace

void unload_module(const Context& ctx, LoadedModule& loaded) {
  if (!loaded.module) return;
  const cu::Driver& d = cu::driver();
  cu::CUcontext popped = nullptr;
  if (d.cuCtxPushCurrent(ctx.ctx) != cu::CUDA_SUCCESS) return;
  d.cuModuleUnload(loaded.module);
  d.cuCtxPopCurrent(&popped);
  loaded.module = nullptr;
  loaded.function = loaded.map_function = loaded.combine_function = nullptr;
}

CompiledModule compile_and_load(const Context& ctx, const PlannedKernel& planned, const StageOptions& stages,
                                bool cached_only) {
  const DeviceInfo& info = ctx.info;
  ContextGuard guard(ctx);
  const cu::Driver& d = cu::driver();
  CompiledModule m;
  const Assembler& as = assembler(info.driver_version);
  m.assembler = as.id();
  std::optional<LoadedModule> fresh;
  // ptxas, started on a miss before LLVM runs, loads while the PTX is generated (support/ptxas.hpp).
  std::optional<ptxas::Job> early;
  const int level = assembler_level(*planned.plan);
  auto start_assembler = [&] {
    if (!as.ptxas.empty()) early.emplace(as.ptxas, planned.target.arch, /*want_cubin=*/true, level);
  };
  // Shared memory beyond the device's opt-in limit is a spec error, before the driver sees it.
  auto check_smem = [&](const CompiledKernel& c) {
    if (c.shared_bytes > info.shared_per_block_optin)
      throw Error(ErrorKind::spec, "kernel " + c.key + " needs " + std::to_string(c.shared_bytes) +
                                       " bytes of shared memory; " + info.name + " allows " +
                                       std::to_string(info.shared_per_block_optin) + " per block");
  };
  Linker link = [&](const CompiledKernel& c) {
    check_smem(c);
    // The key's override folder, when it holds files: a link failure is then the user's PTX or IR.
    std::string overrides;
    if (!stages.override_dir.empty()) {
      std::error_code ec;
      const std::string dir = stages.override_dir + "/" + c.key;
      if (std::filesystem::is_directory(dir, ec) && !std::filesystem::is_empty(dir, ec)) overrides = dir;
    }
    fresh = load_module(as, c, overrides, early ? &*early : nullptr, level);
    early.reset();
    LinkResult r;
    r.cubin = fresh->cubin;
    return r;  // registers/spills are read below, for hits and misses alike
  };
  KernelCacheSettings settings;
  settings.driver_version = info.driver_version;
  settings.assembler = as.id();
  settings.compile = !cached_only;
  KernelBuild b = build_kernel(planned, stages, settings, link, start_assembler);
  if (cached_only && !b.cache_hit) return m;
  m.compiled = std::move(b.compiled);
  m.cache_hit = b.cache_hit;
  m.cache_status = b.cache_status;
  if (!fresh) {
    check_smem(m.compiled);
    try {
      m.loaded = load_cubin(b.cubin, m.compiled);
    } catch (const Error& e) {
      if (!b.cache_hit || e.kind() == ErrorKind::out_of_memory) throw;
      if (cached_only) return CompiledModule{};  // the compile that follows replaces the entry
      log::warn("compile cache entry " + b.key_hash.substr(0, 16) + " (" + m.compiled.key + ") does not load: " +
                e.what() + "; compiling the kernel again and replacing the entry");
      settings.read = false;
      b = build_kernel(planned, stages, settings, link, start_assembler);
      m.compiled = std::move(b.compiled);
      m.cache_hit = false;
      m.cache_status = b.cache_status + " (the cached cubin did not load)";
    }
  }
  if (fresh) m.loaded = std::move(*fresh);
  else if (!m.loaded.module) throw Error(ErrorKind::internal, "internal error: no module was loaded for " + m.compiled.key);
  try {
    // Over 48 KB of dynamic shared memory must be opted into per function (CUDA Programming Guide).
    if (m.compiled.shared_bytes > 48 * 1024)
      cu::check(d.cuFuncSetAttribute(m.loaded.function, cu::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     m.compiled.shared_bytes),
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    cu::check(d.cuFuncGetAttribute(&m.registers, cu::CU_FUNC_ATTRIBUTE_NUM_REGS, m.loaded.function),
              "cuFuncGetAttribute");
    cu::check(d.cuFuncGetAttribute(&m.spill_bytes, cu::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, m.loaded.function),
              "cuFuncGetAttribute");
    cu::check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&m.loaded.ctas_per_sm, m.loaded.function,
                                                            m.compiled.threads, size_t(m.compiled.shared_bytes)),
              "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (const std::string& dir = stages.dump_dir; !dir.empty()) {
      write_file_atomic(dir + "/" + m.compiled.key + "/cubin.cubin", m.loaded.cubin);
      write_file_atomic(dir + "/" + m.compiled.key + "/module.txt", m.loaded.jit_log + "\n");
    }
  } catch (...) {
    unload_module(ctx, m.loaded);
    throw;
  }
  // Not silent: the driver's JIT ignores setmaxnreg (runtime/assembler.hpp), so a warp-specialised
  // kernel it assembled runs slower than the same kernel from ptxas (docs/perf-notes.md §13).
  if (as.ptxas.empty() && m.compiled.ptx.find("setmaxnreg") != std::string::npos) {
    static std::once_flag said;
    std::call_once(said, [&] {
      log::warn("kernel " + m.compiled.key + " relies on setmaxnreg, which the driver's JIT does not honour (" +
                as.why + "): it runs, but 13–22% slower at d=128 on the H200 than assembled by the CUDA toolkit's "
                "ptxas; install the toolkit or point FLASHJIT_PTXAS at its ptxas");
    });
  }
  log::info("loaded " + m.compiled.key + " (" + m.compiled.config.str() + ") on " + info.name + ": " +
            std::to_string(m.registers) + " registers, " + std::to_string(m.spill_bytes) +
            " bytes local memory (" + m.assembler + "); compile cache " + m.cache_status +
            (b.linked ? ", assembled in " + std::to_string(m.loaded.link_ms) + " ms" : "") + ", load " +
            std::to_string(m.loaded.load_ms) + " ms");
  return m;
}

std::string binary_fingerprint(const std::string& cubin, const CompiledKernel& c) {
  std::string s = cubin;
  const std::string map = c.map_entry;
  if (!map.empty()) replace_all(s, map, std::string(map.size(), '#'));
  replace_all(s, c.entry, std::string(c.entry.size(), '#'));
  replace_all(s, c.key, std::string(c.key.size(), '#'));
  return sha256_hex(s);
}

}  // namespace rt

namespace {

std::mutex dir_mu;
std::string& dir_override() {
  static std::string dir;
  return dir;
}

}  // namespace

void set_cache_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(dir_mu);
  dir_override() = dir;
}

std::string cache_dir() {
  {
    std::lock_guard<std::mutex> lock(dir_mu);
    if (!dir_override().empty()) return dir_override();
  }
  if (const std::string& v = knob::get("FLASHJIT_CACHE_DIR"); !v.empty()) return v;
  // XDG Base Directory: "If an implementation encounters a relative path in any of these
  // variables it should consider the path invalid and ignore it." A relative cache would follow the
  // working directory: kernels compiled in one folder, loaded from another.
  auto absolute = [](const char* p) { return p && p[0] == '/'; };
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); absolute(xdg)) return std::string(xdg) + "/flashjit";
  if (const char* home = std::getenv("HOME"); absolute(home)) return std::string(home) + "/.cache/flashjit";
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(::getuid(), &pw, buf, sizeof buf, &found) == 0 && found && absolute(found->pw_dir))
    return std::string(found->pw_dir) + "/.cache/flashjit";
  throw Error(ErrorKind::usage,
              "no folder for the cache: FLASHJIT_CACHE_DIR is not set, XDG_CACHE_HOME and HOME are unset or not "
              "absolute, and the user has no home folder; set FLASHJIT_CACHE_DIR to an absolute path");
}

}  // namespace flashjit

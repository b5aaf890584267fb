#include "runtime/module.hpp"

#include <chrono>
#include <cstdint>

#include "support/ptxas.hpp"

namespace flashjit::rt {

void load_functions(LoadedModule& out, const CompiledKernel& c) {
  const cu::Driver& d = cu::driver();
  const std::string what = "loading kernel " + c.entry + ": ";
  cu::check(d.cuModuleLoadData(&out.module, out.cubin.data()), (what + "cuModuleLoadData").c_str());
  auto get = [&](cu::CUfunction& f, const std::string& name, const std::string& role) {
    if (!name.empty())
      cu::check(d.cuModuleGetFunction(&f, out.module, name.c_str()), (what + "cuModuleGetFunction" + role).c_str());
  };
  try {
    get(out.function, c.entry, "");
    get(out.map_function, c.map_entry, "(block map " + c.map_entry + ")");
    get(out.combine_function, c.combine_entry, "(split-KV combine " + c.combine_entry + ")");
  } catch (...) {
    d.cuModuleUnload(out.module);
    out.module = nullptr;
    throw;
  }
}

namespace {

// ptxas' cubin for the kernel's PTX and architecture, or the error load_module would give.
LoadedModule assemble_with_ptxas(const Assembler& as, const CompiledKernel& c, const std::string& override_dir,
                                 ptxas::Job* early, int level) {
  LoadedModule out;
  const std::string& entry = c.entry;
  ptxas::Result r = early ? early->finish(c.ptx) : ptxas::assemble(as.ptxas, c.ptx, c.arch, /*want_cubin=*/true, level);
  const std::string hint = "\n(FLASHJIT_PTXAS=driver has the driver's JIT assemble it instead)";
  if (!r.ok && !override_dir.empty())
    throw Error(ErrorKind::usage, as.id() + " (" + as.ptxas + ") could not assemble kernel " + entry +
                                      " from the overrides in " + override_dir + " (FLASHJIT_OVERRIDE_DIR):\n" + r.log);
  if (!r.ok)
    throw Error(ErrorKind::compile, as.id() + " (" + as.ptxas + ") could not assemble the generated PTX for " + entry +
                                        ":\n" + r.log + hint);
  out.cubin = std::move(r.cubin);
  out.jit_log = "assembled by " + as.id() + " (" + as.ptxas + ")" +
                (level != 3 ? " at -O" + std::to_string(level) : "") + "\n" + r.log;
  out.link_ms = r.ms;
  return out;
}

}  // namespace

LoadedModule load_module(const Assembler& as, const CompiledKernel& c, const std::string& override_dir,
                         ptxas::Job* early, int level) {
  const cu::Driver& d = cu::driver();
  const std::string &ptx = c.ptx, &entry = c.entry;
  if (!as.ptxas.empty()) {
    LoadedModule out = assemble_with_ptxas(as, c, override_dir, early, level);
    const auto t1 = std::chrono::steady_clock::now();
    load_functions(out, c);
    out.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
    return out;
  }
  LoadedModule out;
  char info[8192] = {};
  char error[8192] = {};
  int options[] = {cu::CU_JIT_INFO_LOG_BUFFER,  cu::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                   cu::CU_JIT_ERROR_LOG_BUFFER, cu::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                   cu::CU_JIT_LOG_VERBOSE,      cu::CU_JIT_OPTIMIZATION_LEVEL};
  void* values[] = {info,
                    reinterpret_cast<void*>(sizeof info),
                    error,
                    reinterpret_cast<void*>(sizeof error),
                    reinterpret_cast<void*>(1),
                    reinterpret_cast<void*>(static_cast<uintptr_t>(level))};
  const unsigned n_options = level < 3 ? 6 : 5;
  auto t0 = std::chrono::steady_clock::now();
  cu::CUlinkState link = nullptr;
  cu::check(d.cuLinkCreate(n_options, options, values, &link), "cuLinkCreate");
  struct LinkGuard {
    const cu::Driver& d;
    cu::CUlinkState s;
    ~LinkGuard() { d.cuLinkDestroy(s); }
  } guard{d, link};
  std::string source = ptx;  // cuLinkAddData wants a NUL-terminated, mutable-looking buffer
  cu::CUresult r = d.cuLinkAddData(link, cu::CU_JIT_INPUT_PTX, source.data(), source.size() + 1, entry.c_str(),
                                   0, nullptr, nullptr);
  void* cubin = nullptr;
  size_t cubin_size = 0;
  if (r == cu::CUDA_SUCCESS) r = d.cuLinkComplete(link, &cubin, &cubin_size);
  if (r == cu::CUDA_ERROR_OUT_OF_MEMORY)
    throw Error(ErrorKind::out_of_memory, "out of device memory while the driver assembled kernel " + entry + ": " +
                                              cu::error_name(r));
  if (r != cu::CUDA_SUCCESS && !override_dir.empty())
    throw Error(ErrorKind::usage, "the driver could not assemble kernel " + entry + " from the overrides in " +
                                      override_dir + " (FLASHJIT_OVERRIDE_DIR): " + cu::error_name(r) + "\n" + error);
  if (r != cu::CUDA_SUCCESS)
    throw Error(ErrorKind::compile, "the driver could not assemble the generated PTX for " + entry + ": " +
                                        cu::error_name(r) + "\n" + error +
                                        "\n(this is a flashjit bug; please report it with FLASHJIT_DUMP_DIR output)");
  out.cubin.assign(static_cast<const char*>(cubin), cubin_size);
  out.jit_log = "assembled by the driver's JIT" + (level < 3 ? " at level " + std::to_string(level) : std::string()) +
                "\n" + std::string(info);
  auto t1 = std::chrono::steady_clock::now();
  load_functions(out, c);
  auto t2 = std::chrono::steady_clock::now();
  out.link_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  out.load_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  return out;
}

}  // namespace flashjit::rt

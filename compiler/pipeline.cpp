// Every compiler stage, in order — read this file to know what flashjit does to a spec (after
// Halide's Lower.cpp):
//   spec     the canonical text every key derives from
//   analyze  desugared mask and score, score derivative, tile ranges, block-map policy (once per spec)
//   plan     template + tile config → the tile plan, limits checked, and the kernel key
//   llvm-ir  the template writes its kernels into a private LLVM context (overridable)
//   opt      LLVM O3 with NVPTX's own passes
//   ptx      NVPTX instruction selection and printing (overridable)
// Each stage is timed, logged at debug level and dumped to FLASHJIT_DUMP_DIR/<key>/<stage>.<ext>;
// llvm-ir and ptx can be replaced by a file in FLASHJIT_OVERRIDE_DIR/<key>/ (Triton's named,
// overridable stages). The pipeline knows templates only through compiler/kernel_template.hpp.
#include "compiler/pipeline.hpp"

#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Target/TargetMachine.h>

#include <chrono>
#include <filesystem>

#include "compiler/codegen/emit.hpp"
#include "compiler/codegen/target.hpp"
#include "support/atomic_file.hpp"
#include "support/file_read.hpp"
#include "support/knobs.hpp"
#include "support/log.hpp"
#include "support/text.hpp"

namespace flashjit {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

const char* extension(const std::string& stage) {
  if (stage == "llvm-ir" || stage == "opt") return ".ll";
  if (stage == "ptx") return ".ptx";
  return ".txt";
}

class StageRunner {
 public:
  StageRunner(CompiledKernel& out, const StageOptions& options) : out_(out), options_(options) {}

  bool dumping() const { return !options_.dump_dir.empty(); }

  // Records, logs and dumps a stage's text that was produced in `ms`.
  void record(const std::string& stage, double ms, const std::string& text) {
    out_.stages.push_back({stage, ms, text});
    log::debug("stage " + stage + " " + out_.key + ": " + std::to_string(ms) + " ms, " + std::to_string(text.size()) +
               " bytes");
    if (!dumping()) return;
    // Dumps are for debugging: a full disk or a bad folder costs the dump, never the compile.
    // Threads compiling one spec write the same names; write_file_atomic renames whole files in.
    const std::string dir = options_.dump_dir + "/" + out_.key, path = dir + "/" + stage + extension(stage);
    try {
      make_dirs(dir);
      write_file_atomic(path, text);
    } catch (const std::exception& e) {
      log::warn("stage " + stage + " of " + out_.key + " was not dumped to " + path + " (the compile goes on): " +
                e.what());
    }
  }

  // Runs `fn` (which returns the stage's text) and records it.
  template <class Fn>
  std::string run(const std::string& stage, Fn fn) {
    const auto t0 = std::chrono::steady_clock::now();
    std::string text = fn();
    record(stage, ms_since(t0), text);
    return text;
  }

  // The override file for `stage`, or "" when there is none. Something else at that name (a
  // directory, a FIFO) is an error: silently ignoring it would run the unmodified stage.
  std::string override_path(const std::string& stage) const {
    if (options_.override_dir.empty()) return "";
    std::string path = options_.override_dir + "/" + out_.key + "/" + stage + extension(stage);
    std::error_code ec;
    const std::filesystem::file_status st = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(st)) return "";
    if (!std::filesystem::is_regular_file(st))
      throw Error(ErrorKind::usage, "override " + path + " is not a regular file; put the " + stage +
                                        " text in a file of that name, or remove it");
    return path;
  }

 private:
  CompiledKernel& out_;
  const StageOptions& options_;
};

// An override's text: bounded, and never empty.
std::string read_override(const std::string& path) {
  BoundedRead r = read_file_bounded(path, kMaxModuleBytes);
  if (r.status == BoundedRead::Status::missing) throw Error(ErrorKind::usage, "override " + path + " vanished");
  if (r.status != BoundedRead::Status::ok) throw Error(ErrorKind::usage, "override " + r.error);
  if (trim(r.content).empty()) throw Error(ErrorKind::usage, "override " + path + " is empty");
  return std::move(r.content);
}

std::unique_ptr<llvm::Module> read_ir_override(const std::string& path, const std::string& entry, llvm::LLVMContext& ctx) {
  const std::string text = read_override(path);
  llvm::SMDiagnostic diag;
  std::unique_ptr<llvm::Module> module = llvm::parseIR(llvm::MemoryBufferRef(text, path), diag, ctx);
  if (!module)
    throw Error(ErrorKind::usage, "override " + path + ":" + std::to_string(diag.getLineNo()) + ":" +
                                      std::to_string(diag.getColumnNo()) + ": " + diag.getMessage().str());
  const llvm::Function* f = module->getFunction(entry);
  if (!f || f->isDeclaration())
    throw Error(ErrorKind::usage, "override " + path + " does not define @" + entry +
                                      ", the kernel this key names; an llvm-ir override replaces the whole module");
  return module;
}

// A PTX override is handed to the driver as is; text that is not a module with this key's kernel
// would fail there (or load a module without the kernel), far from the file that caused it.
std::string read_ptx_override(const std::string& path, const std::string& entry) {
  std::string ptx = read_override(path);
  for (const char* directive : {".version", ".target"})
    if (ptx.find(directive) == std::string::npos)
      throw Error(ErrorKind::usage, "override " + path + " is not PTX: it has no " + directive + " directive");
  const std::string decl = ".entry " + entry;
  for (size_t at = ptx.find(decl); at != std::string::npos; at = ptx.find(decl, at + 1)) {
    const char next = at + decl.size() < ptx.size() ? ptx[at + decl.size()] : '\0';
    if (next == '(' || next == ' ' || next == '\n' || next == '\t' || next == '\r') return ptx;
  }
  throw Error(ErrorKind::usage, "override " + path + " has no " + decl + ", the kernel this key names");
}

}  // namespace

Target target_for(const CompileOptions& options, const std::string& default_arch) {
  Target t;
  t.arch = options.arch.empty() ? default_arch : options.arch;
  const std::string& mma = options.mma ? *options.mma : knob::get("FLASHJIT_MMA");
  if (mma != "auto" && mma != "sync")
    throw Error(ErrorKind::usage, "CompileOptions::mma '" + mma + "' is not allowed; use auto or sync");
  t.allow_wgmma = mma == "auto";
  // Without a device the assembler is what FLASHJIT_PTXAS says; rt::device_target sets the one
  // the runtime chose (auto with no suitable ptxas is the driver's JIT).
  t.moves_registers = knob::get("FLASHJIT_PTXAS") != "driver";
  t.backward_warpgroups = knob::get("FLASHJIT_BWD_WARPGROUPS") == "on";
  t.backward_producer = knob::get("FLASHJIT_BWD_PRODUCER") == "on";
  t.tma = knob::get("FLASHJIT_TMA") == "on";
  t.quick = tiered_mode(options) == "quick";
  return t;
}

std::string tiered_mode(const CompileOptions& options) {
  const std::string& mode = options.tiered ? *options.tiered : knob::get("FLASHJIT_TIERED");
  if (mode != "on" && mode != "off" && mode != "quick")
    throw Error(ErrorKind::usage, "CompileOptions::tiered '" + mode + "' is not allowed; use on, off or quick");
  return mode;
}

StageOptions stage_options(const CompileOptions& options, bool keep_ir_default) {
  StageOptions s;
  s.dump_dir = options.dump_dir ? *options.dump_dir : knob::get("FLASHJIT_DUMP_DIR");
  s.override_dir = options.override_dir ? *options.override_dir : knob::get("FLASHJIT_OVERRIDE_DIR");
  s.keep_llvm_ir = options.keep_llvm_ir.value_or(keep_ir_default);
  return s;
}

CompiledKernel PlannedKernel::describe() const {
  CompiledKernel out;
  out.key = key.hash;
  out.entry = entry;
  out.description = plan->describe();
  const LaunchFacts facts = plan->launch();
  out.map_entry = facts.has_map ? entry + "_blockmap" : "";
  out.combine_entry = facts.has_combine ? entry + "_combine" : "";
  out.map_per_batch = facts.map_per_batch;
  out.map_per_head = facts.map_per_head;
  out.persistent = facts.persistent;
  out.tensor_maps = facts.tensor_maps;
  out.arch = target.arch;
  out.config = config;
  out.config_reason = config_reason;
  out.threads = facts.threads;
  out.shared_bytes = facts.shared_bytes;
  return out;
}

PlannedKernel plan_kernel(const AnalyzedSpecPtr& spec, const KernelRequest& request) {
  const auto t0 = std::chrono::steady_clock::now();
  PlannedKernel p;
  p.spec = spec;
  p.kernel_template = &find_template(request.template_name);
  p.target = request.target;
  p.config_reason = "given by the caller";
  p.config = request.config ? *request.config : p.kernel_template->heuristic(*spec, p.target, &p.config_reason);
  p.plan = p.kernel_template->plan(spec, p.config, p.target);
  p.key = make_kernel_key(*spec, *p.plan, p.config, p.target.arch);
  p.entry = "flashjit_" + p.kernel_template->symbol + "_" + p.key.hash;
  p.plan_ms = ms_since(t0);
  return p;
}

CompiledKernel compile_planned(const PlannedKernel& planned, const StageOptions& options) {
  CompiledKernel out = planned.describe();
  StageRunner stages(out, options);
  const std::string& arch = planned.target.arch;

  stages.record("spec", 0, planned.spec->canonical);
  stages.record("analyze", planned.spec->analysis_ms, planned.spec->describe());
  stages.record("plan", planned.plan_ms, out.description + "\nreason: " + out.config_reason + "\nkey:\n" +
                                             planned.key.text + "\n");
  // Printing a module (~400 KB of text) costs ~15 ms of a cold compile: only on request.
  const bool print_ir = options.keep_llvm_ir || stages.dumping();

  llvm::LLVMContext ctx;
  codegen::install_diagnostics(ctx);
  std::unique_ptr<llvm::TargetMachine> tm = codegen::make_target_machine(arch, planned.plan->quick());
  std::unique_ptr<llvm::Module> module;
  stages.run("llvm-ir", [&] {
    if (std::string path = stages.override_path("llvm-ir"); !path.empty()) {
      module = read_ir_override(path, planned.entry, ctx);
      log::warn("llvm-ir of " + out.key + " replaced by " + path);
    } else {
      module = std::make_unique<llvm::Module>("flashjit_" + out.key, ctx);
      module->setTargetTriple(tm->getTargetTriple().str());
      module->setDataLayout(tm->createDataLayout());
      planned.plan->emit(*module, planned.entry);
    }
    codegen::verify_module(*module);
    return print_ir ? codegen::print_module(*module) : std::string();
  });

  out.llvm_ir = stages.run("opt", [&] {
    codegen::optimize_module(*module, *tm);
    codegen::verify_module(*module);
    return print_ir ? codegen::print_module(*module) : std::string();
  });

  out.ptx = stages.run("ptx", [&] {
    if (std::string path = stages.override_path("ptx"); !path.empty()) {
      std::string ptx = read_ptx_override(path, planned.entry);
      log::warn("ptx of " + out.key + " replaced by " + path);
      return ptx;
    }
    return codegen::emit_ptx(*module, *tm);
  });
  log::info("compiled " + out.key + ": " + out.description + " (" + out.config_reason + "), PTX " +
            std::to_string(out.ptx.size()) + " bytes");
  return out;
}

CompiledKernel compile_to_ptx(const AttentionSpec& spec, const CompileOptions& options) {
  KernelRequest request;
  request.target = target_for(options, "sm_90a");
  request.config = options.config;
  if (options.backward) {
    request.template_name = "attention_bwd";
    request.config = options.backward_config;
  }
  return compile_planned(plan_kernel(analyze_spec(spec), request), stage_options(options, true));
}

VersionInfo versions() {
  return {FLASHJIT_VERSION, LLVM_VERSION_STRING, codegen::ptx_isa_version("sm_90a")};
}

}  // namespace flashjit

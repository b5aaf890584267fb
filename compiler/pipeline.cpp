// Every compiler stage, in order — read this file to know what flashjit does to a spec
// (after Halide's Lower.cpp). Each stage is timed, logged at debug level, dumped to
// FLASHJIT_DUMP_DIR/<key>/<stage>.<ext>, and, for llvm-ir and ptx, can be replaced by a file in
// FLASHJIT_OVERRIDE_DIR/<key>/ (Triton's named, overridable stages).
#include "compiler/pipeline.hpp"

#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Target/TargetMachine.h>

#include <chrono>

#include "compiler/codegen/emit.hpp"
#include "compiler/codegen/target.hpp"
#include "support/knobs.hpp"
#include "support/log.hpp"
#include "support/text.hpp"
#include "templates/attention_fwd.hpp"
#include "templates/block_map.hpp"
#include "templates/forward_plan.hpp"

namespace flashjit {

namespace {

// Bumped whenever a template's generated code changes, so cache keys change with it.
constexpr const char* kTemplateVersion = "fwd-11";

const char* extension(const std::string& stage) {
  if (stage == "llvm-ir" || stage == "opt") return ".ll";
  if (stage == "ptx") return ".ptx";
  return ".txt";
}

class StageRunner {
 public:
  StageRunner(CompiledKernel& out, std::string dump_dir, std::string override_dir)
      : out_(out), dump_dir_(std::move(dump_dir)), override_dir_(std::move(override_dir)) {}

  bool dumping() const { return !dump_dir_.empty(); }

  // Runs `fn` (which returns the stage's text), records, logs and dumps it.
  template <class Fn>
  std::string run(const std::string& stage, Fn fn) {
    auto t0 = std::chrono::steady_clock::now();
    std::string text = fn();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    out_.stages.push_back({stage, ms, text});
    log::debug("stage " + stage + " " + out_.key + ": " + std::to_string(ms) + " ms, " +
               std::to_string(text.size()) + " bytes");
    if (!dump_dir_.empty()) {
      std::string dir = dump_dir_ + "/" + out_.key;
      make_dirs(dir);
      write_file_atomic(dir + "/" + stage + extension(stage), text);
    }
    return text;
  }

  // The override file for `stage`, or "" when there is none.
  std::string override_path(const std::string& stage) const {
    if (override_dir_.empty()) return "";
    std::string path = override_dir_ + "/" + out_.key + "/" + stage + extension(stage);
    return file_exists(path) ? path : "";
  }

 private:
  CompiledKernel& out_;
  std::string dump_dir_, override_dir_;
};

std::string kernel_key(const AttentionSpec& spec, const TileConfig& c, const std::string& arch) {
  AttentionSpec unnamed = spec;
  unnamed.name.clear();  // names are for people; they do not change the code
  return hash_hex(std::string(FLASHJIT_VERSION) + "|" + kTemplateVersion + "|" + arch + "|ptx" +
                  codegen::ptx_isa_version(arch) + "|" + unnamed.canonical() + "|" + c.str() + "|" + mma_kind(c, arch));
}

}  // namespace

const char* template_version() { return kTemplateVersion; }

CompiledKernel compile_to_ptx(const AttentionSpec& spec, const CompileOptions& options) {
  CompiledKernel out;
  out.arch = options.arch.empty() ? "sm_90a" : options.arch;
  std::string reason = "given by the caller";
  TileConfig config = options.config ? *options.config : heuristic_config(spec, out.arch, &reason);
  const std::string& arch = out.arch;
  out.config = config;
  out.config_reason = reason;
  out.key = kernel_key(spec, config, arch);
  StageRunner stages(out, options.dump_dir ? *options.dump_dir : knob::get("FLASHJIT_DUMP_DIR"),
                     options.override_dir ? *options.override_dir : knob::get("FLASHJIT_OVERRIDE_DIR"));

  // spec: the canonical text every later stage and cache key derives from.
  stages.run("spec", [&] { return spec.canonical(); });

  // check: types and limits, before any code exists (a rejected config names the limit).
  ForwardPlan plan;
  stages.run("check", [&] {
    plan = plan_forward(spec, config, reason, arch);
    plan.entry = "flashjit_fwd_" + out.key;
    return plan.describe() + "\nreason: " + reason + "\n";
  });
  record_plan(plan, out);
  // Printing a module (~400 KB of text) costs ~15 ms of a cold compile: only on request.
  const bool print_ir = options.keep_llvm_ir.value_or(true) || stages.dumping();

  // instantiate + llvm-ir: the template writes the kernel into a private context and module.
  llvm::LLVMContext ctx;
  codegen::install_diagnostics(ctx);
  std::unique_ptr<llvm::TargetMachine> tm = codegen::make_target_machine(arch);
  std::unique_ptr<llvm::Module> module;
  stages.run("instantiate", [&] { return plan.describe() + "\n"; });
  stages.run("llvm-ir", [&] {
    if (std::string path = stages.override_path("llvm-ir"); !path.empty()) {
      llvm::SMDiagnostic diag;
      module = llvm::parseIRFile(path, diag, ctx);
      if (!module)
        throw Error(ErrorKind::usage, "override " + path + ":" + std::to_string(diag.getLineNo()) + ":" +
                                          std::to_string(diag.getColumnNo()) + ": " + diag.getMessage().str());
      log::warn("llvm-ir of " + out.key + " replaced by " + path);
    } else {
      module = std::make_unique<llvm::Module>("flashjit_" + out.key, ctx);
      module->setTargetTriple(tm->getTargetTriple().str());
      module->setDataLayout(tm->createDataLayout());
      emit_attention_forward(*module, plan);
      if (plan.block_map) emit_block_map(*module, plan);
    }
    codegen::verify_module(*module);
    return print_ir ? codegen::print_module(*module) : std::string();
  });

  // opt: LLVM O3 with NVPTX's own passes.
  out.llvm_ir = stages.run("opt", [&] {
    codegen::optimize_module(*module, *tm);
    codegen::verify_module(*module);
    return print_ir ? codegen::print_module(*module) : std::string();
  });

  // ptx: NVPTX instruction selection and printing.
  out.ptx = stages.run("ptx", [&] {
    if (std::string path = stages.override_path("ptx"); !path.empty()) {
      log::warn("ptx of " + out.key + " replaced by " + path);
      return read_file(path);
    }
    return codegen::emit_ptx(*module, *tm);
  });
  log::info("compiled " + out.key + ": " + plan.describe() + " (" + reason + "), PTX " +
            std::to_string(out.ptx.size()) + " bytes");
  return out;
}

VersionInfo versions() {
  return {FLASHJIT_VERSION, LLVM_VERSION_STRING, codegen::ptx_isa_version("sm_90a")};
}

}  // namespace flashjit

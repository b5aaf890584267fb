#include "compiler/codegen/target.hpp"

#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <mutex>
#include <set>

#include "flashjit/flashjit.hpp"

namespace flashjit::codegen {

namespace {

constexpr const char* kTriple = "nvptx64-nvidia-cuda";

// LLVM calls this on report_fatal_error and would exit(1) if it returned. Throwing unwinds out
// of LLVM (built with unwind tables) so the host process survives; the compile is abandoned.
[[noreturn]] void on_fatal(void*, const char* reason, bool) {
  throw Error(ErrorKind::compile, std::string("LLVM could not compile the generated kernel: ") + reason +
                                      " (this is a flashjit bug; please report it with FLASHJIT_DUMP_DIR output)");
}

// CodeGenPrepare walks the function until nothing changes, and in a function of fewer than
// `cgpp-huge-func` blocks it restarts the walk from the entry block after each change that
// touches the dominator tree, re-visiting every instruction; each visit of an inline-asm call
// parses its constraint string again, and a wgmma call has up to 130 constraints. On the d=128
// forward that was a quarter of the LLVM time (about 30 walks). At 0 every function takes the
// huge-function path, which re-visits only the blocks that changed (CodeGenPrepare.cpp,
// `IsHugeFunc`); the PTX of the kernels measured stayed byte-identical (docs/perf-notes.md §21).
// The option belongs to the LLVM linked into this library (its symbols are hidden), so no other
// LLVM in the process sees it.
void take_short_codegen_prepare() {
  llvm::StringMap<llvm::cl::Option*>& options = llvm::cl::getRegisteredOptions();
  auto it = options.find("cgpp-huge-func");
  if (it != options.end()) it->second->addOccurrence(0, "cgpp-huge-func", "0");
}

}  // namespace

std::string ptx_isa_version(const std::string& arch) { return "8.0"; }

void init_llvm() {
  // The only process-wide LLVM state we touch: target registration, the fatal-error hook and
  // one CodeGenPrepare threshold.
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    llvm::install_fatal_error_handler(on_fatal, nullptr);
    take_short_codegen_prepare();
  });
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(const std::string& arch, bool quick) {
  static const std::set<std::string> allowed = {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"};
  if (!allowed.count(arch))
    throw Error(ErrorKind::spec, "arch '" + arch + "' is not supported; allowed: sm_80, sm_86, sm_89, sm_90, sm_90a");
  init_llvm();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(kTriple, err);
  if (!target) throw Error(ErrorKind::internal, "internal error: NVPTX target missing from this build: " + err);
  llvm::TargetOptions opts;
  // PTX 8.0 (PTX ISA §1.3 "PTX ISA Version 8.0") is the first to accept sm_90a; LLVM 19 emits it.
  std::string features = "+ptx80";
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(kTriple, arch, features, opts, llvm::Reloc::PIC_, std::nullopt,
                                  quick ? llvm::CodeGenOptLevel::Default : llvm::CodeGenOptLevel::Aggressive));
  if (!tm) throw Error(ErrorKind::internal, "internal error: LLVM refused to create a TargetMachine for " + arch);
  return tm;
}

void install_diagnostics(llvm::LLVMContext& ctx) {
  ctx.setDiagnosticHandlerCallBack(
      [](const llvm::DiagnosticInfo* di, void*) {
        if (di->getSeverity() != llvm::DS_Error) return;
        std::string text;
        llvm::raw_string_ostream os(text);
        llvm::DiagnosticPrinterRawOStream printer(os);
        di->print(printer);
        throw Error(ErrorKind::compile, "LLVM error while compiling the generated kernel: " + os.str());
      },
      nullptr);
}

}  // namespace flashjit::codegen

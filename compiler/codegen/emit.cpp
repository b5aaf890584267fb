#include "compiler/codegen/emit.hpp"

#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "flashjit/flashjit.hpp"

namespace flashjit::codegen {

void verify_module(const llvm::Module& module) {
  std::string report;
  llvm::raw_string_ostream os(report);
  if (llvm::verifyModule(module, &os))
    throw Error(ErrorKind::compile, "generated LLVM IR does not verify (a flashjit bug): " + os.str());
}

namespace {

// LLVM 19's O3 module pipeline as `opt -O3 -print-pipeline-passes` prints it (PassBuilder::
// buildPerModuleDefaultPipeline), less the 82 of its 113 passes that change no kernel flashjit
// generates: its kernels call only intrinsics and inline PTX, and their loops come unrolled as the
// templates want them, so the inliner, most interprocedural passes, the coroutine and OpenMP ones,
// the loop and SLP vectorisers, the unrollers, two of the eight InstCombine runs and four of the nine
// SimplifyCFG runs find nothing to do. The rest gives byte-identical PTX in 20-30% less time
// (docs/perf-notes.md §39: 483 kernels compared). A [pipeline] test compiles every template and
// form under both pipelines and compares them, so an LLVM upgrade that makes a dropped pass matter
// fails there.
std::string join(std::initializer_list<std::string> passes) {
  std::string out;
  for (const std::string& p : passes) out += (out.empty() ? "" : ",") + p;
  return out;
}

// Built on the first compile, not when the library loads.
const std::string& short_pipeline() {
  static const std::string pipeline = [] {
    const std::string instcombine = "instcombine<max-iterations=1;no-use-loop-info;no-verify-fixpoint>";
    // The three option sets O3 runs SimplifyCFG with; every run shares the rest.
    auto simplifycfg_with = [](const std::string& options) {
      return "simplifycfg<bonus-inst-threshold=1;" + options +
             ";speculate-blocks;simplify-cond-branch;no-speculate-unpredictables>";
    };
    const std::string simplifycfg_early = simplifycfg_with(
        "no-forward-switch-cond;no-switch-range-to-icmp;no-switch-to-lookup;keep-loops;no-hoist-common-insts;"
        "no-sink-common-insts");
    const std::string simplifycfg = simplifycfg_with(
        "no-forward-switch-cond;switch-range-to-icmp;no-switch-to-lookup;keep-loops;no-hoist-common-insts;"
        "no-sink-common-insts");
    const std::string simplifycfg_late = simplifycfg_with(
        "forward-switch-cond;switch-range-to-icmp;switch-to-lookup;no-keep-loops;hoist-common-insts;sink-common-insts");
    const std::string loop_mssa =
        join({"loop-instsimplify", "loop-simplifycfg", "licm<no-allowspeculation>",
              "loop-rotate<header-duplication;no-prepare-for-lto>", "licm<allowspeculation>"});
    const std::string simplification =
        join({"early-cse<memssa>", "speculative-execution<only-if-divergent-target>", "correlated-propagation",
              simplifycfg, instcombine, "reassociate", "constraint-elimination", "loop-mssa(" + loop_mssa + ")",
              instcombine, "loop(indvars)", "gvn<>", instcombine, "correlated-propagation"});
    return join({
        "function(nvvm-intr-range)",
        "function<eager-inv>(" + join({simplifycfg_early, "sroa<modify-cfg>", "early-cse<>"}) + ")",
        "ipsccp",
        "function<eager-inv>(" + join({instcombine, simplifycfg}) + ")",
        "cgscc(devirt<4>(function-attrs<skip-non-recursive-function-attrs>,function<eager-inv;no-rerun>(" +
            simplification + ")))",
        "function<eager-inv>(" +
            join({simplifycfg_late, "vector-combine", instcombine, "infer-alignment", instcombine, "div-rem-pairs"}) +
            ")",
    });
  }();
  return pipeline;
}

}  // namespace

void optimize_module(llvm::Module& module, llvm::TargetMachine& tm, OptPipeline pipeline) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // The TargetMachine gives the passes NVPTX's cost model and registers NVPTX's own passes
  // (nvvm-intr-range; O3 adds NVVMReflect).
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  if (pipeline == OptPipeline::o3) {
    mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  } else if (llvm::Error e = pb.parsePassPipeline(mpm, short_pipeline())) {
    throw Error(ErrorKind::internal,
                "internal error: LLVM rejects flashjit's pass pipeline: " + llvm::toString(std::move(e)));
  }
  mpm.run(module, mam);
}

std::string emit_ptx(llvm::Module& module, llvm::TargetMachine& tm) {
  llvm::SmallString<0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
    throw Error(ErrorKind::internal, "internal error: NVPTX cannot emit assembly for this TargetMachine");
  pm.run(module);
  return std::string(buffer.str());
}

std::string print_module(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return os.str();
}

}  // namespace flashjit::codegen

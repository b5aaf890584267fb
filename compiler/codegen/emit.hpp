// The back half of the compiler: verify, optimise (the O3 passes that change a kernel), print PTX.
#pragma once

#include <string>

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace flashjit::codegen {

// Throws Error(compile) with the verifier's report when the module is malformed.
void verify_module(const llvm::Module& module);
// short: the passes of LLVM's O3 that change flashjit's kernels (the default); o3: all of them,
// which tests compare it with.
enum class OptPipeline { short_o3, o3 };
void optimize_module(llvm::Module& module, llvm::TargetMachine& tm, OptPipeline pipeline = OptPipeline::short_o3);
std::string emit_ptx(llvm::Module& module, llvm::TargetMachine& tm);
std::string print_module(const llvm::Module& module);

}  // namespace flashjit::codegen

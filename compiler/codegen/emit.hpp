// The back half of the compiler: verify, optimise (LLVM O3) and print PTX.
#pragma once

#include <string>

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace flashjit::codegen {

// Throws Error(compile) with the verifier's report when the module is malformed.
void verify_module(const llvm::Module& module);
void optimize_module(llvm::Module& module, llvm::TargetMachine& tm);
std::string emit_ptx(llvm::Module& module, llvm::TargetMachine& tm);
std::string print_module(const llvm::Module& module);

}  // namespace flashjit::codegen

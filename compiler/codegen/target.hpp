// LLVM NVPTX target setup: one TargetMachine per compile, PTX ISA version per SM, fatal errors as exceptions.
#pragma once

#include <memory>
#include <string>

namespace llvm {
class TargetMachine;
class Module;
class LLVMContext;
}  // namespace llvm

namespace flashjit::codegen {

// The PTX ISA version emitted for `arch` ("8.0" for every arch we target: the lowest that has sm_90a).
std::string ptx_isa_version(const std::string& arch);

// Registers NVPTX once per process and routes LLVM's fatal errors to flashjit::Error(compile).
void init_llvm();

// A private TargetMachine for `arch` (sm_80, sm_86, sm_89, sm_90, sm_90a); Error(spec) otherwise.
// Code generation runs at CodeGenOptLevel::Aggressive, or Default for a `quick` plan
// (KernelPlan::quick): NVPTX then runs EarlyCSE where Aggressive runs GVN before instruction
// selection, ~10% of the `ptx` stage (docs/perf-notes.md §45, §67).
std::unique_ptr<llvm::TargetMachine> make_target_machine(const std::string& arch, bool quick = false);

// Collects the context's diagnostics instead of printing them; errors become Error(compile).
void install_diagnostics(llvm::LLVMContext& ctx);

}  // namespace flashjit::codegen

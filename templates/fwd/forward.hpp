// The FlashAttention forward template (FlashAttention-2, Dao 2023, Algorithm 1), emitted as LLVM IR.
#pragma once

#include "templates/fwd/plan.hpp"

namespace llvm {
class Module;
class Function;
}  // namespace llvm

namespace flashjit {

// Adds the kernel `entry` to `module` with the parameters of templates/common/forward_abi.hpp.
llvm::Function* emit_attention_forward(llvm::Module& module, const ForwardPlan& plan, const std::string& entry);

}  // namespace flashjit

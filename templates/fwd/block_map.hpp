// The block-map pre-pass: for masks the closed form cannot describe exactly (tensor reads,
// non-affine terms), one CTA per query tile walks the key tiles inside the closed-form visit
// range, evaluates the mask on every element, and lists the tiles with any visible element
// (flagging those with all visible). Same mask code as the forward kernel: one semantics.
#pragma once

#include "templates/fwd/plan.hpp"

namespace llvm {
class Module;
class Function;
}  // namespace llvm

namespace flashjit {

// Adds kernel `entry + "_blockmap"` with the forward kernel's parameter list and grid.
llvm::Function* emit_block_map(llvm::Module& module, const ForwardPlan& plan, const std::string& entry);

}  // namespace flashjit

// Inline PTX for the tile primitives that need instructions LLVM's NVPTX back end has no
// intrinsic for: the call itself, and text pieces of its operands (shared addresses with an
// immediate offset, register lists).
#pragma once

#include <string>
#include <vector>

#include "compiler/tile/emitter.hpp"

namespace flashjit::tile {

// "[$n]" or "[$n+imm]": the constant part of a shared address, folded into the instruction.
inline std::string asm_address(int operand, int imm) {
  std::string r = "[$" + std::to_string(operand);
  if (imm) r += "+" + std::to_string(imm);
  return r + "]";
}

// "{$first, ..., $first+count-1}": a vector operand of `count` registers.
inline std::string asm_reg_list(int first, int count) {
  std::string s = "{";
  for (int i = 0; i < count; ++i) s += (i ? ", $" : "$") + std::to_string(first + i);
  return s + "}";
}

// `text` as an inline-asm call on `args` returning `ret` (void, one type, or a struct of the
// outputs). With side effects (the default) LLVM neither drops nor merges it, nor moves memory
// operations across it when `constraints` clobbers memory.
llvm::CallInst* inline_ptx(Emitter& e, llvm::Type* ret, const std::vector<llvm::Value*>& args, const std::string& text,
                           const std::string& constraints, bool side_effects = true);

}  // namespace flashjit::tile

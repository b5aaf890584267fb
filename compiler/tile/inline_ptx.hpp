// Text pieces of inline PTX operands, shared by the tile primitives that use inline asm
// (shared addresses with an immediate offset, register lists).
#pragma once

#include <string>

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

}  // namespace flashjit::tile

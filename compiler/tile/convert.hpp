// fp16/bf16 <-> fp32 for element pairs packed in 32 bits (the unit a lane moves).
#pragma once

#include <utility>

#include "compiler/tile/emitter.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit::tile {

// Two 16-bit elements in an i32 (low half = first element) → two f32.
std::pair<llvm::Value*, llvm::Value*> unpack_pair(Emitter& e, llvm::Value* packed, DType dtype);
// Two f32 → two 16-bit elements in an i32, rounded to nearest even (cvt.rn.{f16,bf16}.f32).
llvm::Value* pack_pair(Emitter& e, llvm::Value* lo, llvm::Value* hi, DType dtype);

}  // namespace flashjit::tile

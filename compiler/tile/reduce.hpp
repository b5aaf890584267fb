// Warp-wide reductions by butterfly shuffles: every lane ends with the result.
#pragma once

#include "compiler/tile/emitter.hpp"

namespace flashjit::tile {

llvm::Value* warp_sum(Emitter& e, llvm::Value* x);
llvm::Value* warp_max(Emitter& e, llvm::Value* x);

}  // namespace flashjit::tile

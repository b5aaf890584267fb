// Row reductions over the four lanes of a quad: in the m16n8 C layout (PTX ISA §9.7.13.4.8) the
// lanes 4g .. 4g + 3 hold row g's columns, so a row's max or sum needs two butterfly shuffles.
#pragma once

#include "compiler/tile/emitter.hpp"

namespace flashjit::tile {

llvm::Value* quad_max(Emitter& e, llvm::Value* x);
llvm::Value* quad_sum(Emitter& e, llvm::Value* x);

}  // namespace flashjit::tile

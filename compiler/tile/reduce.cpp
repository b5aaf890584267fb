#include "compiler/tile/reduce.hpp"

#include "compiler/tile/gpu.hpp"

namespace flashjit::tile {

llvm::Value* quad_max(Emitter& e, llvm::Value* x) {
  x = e.b.CreateMaxNum(x, shfl_xor(e, x, 1));
  return e.b.CreateMaxNum(x, shfl_xor(e, x, 2));
}

llvm::Value* quad_sum(Emitter& e, llvm::Value* x) {
  x = e.b.CreateFAdd(x, shfl_xor(e, x, 1));
  return e.b.CreateFAdd(x, shfl_xor(e, x, 2));
}

}  // namespace flashjit::tile

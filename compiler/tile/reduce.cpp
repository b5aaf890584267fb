#include "compiler/tile/reduce.hpp"

#include "compiler/tile/gpu.hpp"

namespace flashjit::tile {

llvm::Value* warp_sum(Emitter& e, llvm::Value* x) {
  for (int m = 16; m >= 1; m /= 2) x = e.b.CreateFAdd(x, shfl_xor(e, x, m));
  return x;
}

llvm::Value* warp_max(Emitter& e, llvm::Value* x) {
  for (int m = 16; m >= 1; m /= 2) x = e.b.CreateMaxNum(x, shfl_xor(e, x, m));
  return x;
}

}  // namespace flashjit::tile

// Runs straight-line integer LLVM IR on the host: the values the kernel's emitted code computes,
// for tests that compare them with brute force. Arguments are bound to values; add, sub, mul,
// sdiv, shifts, and/or/xor, compares, selects, casts, smin/smax/umin/umax and constants evaluate
// exactly (APInt, two's complement as the GPU does); anything else is a test failure.
#pragma once

#include <llvm/ADT/APInt.h>
#include <llvm/IR/Value.h>

#include <map>

namespace flashjit::test {

class IrEval {
 public:
  void bind(llvm::Value* v, int64_t x);
  llvm::APInt eval(llvm::Value* v);
  int64_t value(llvm::Value* v) { return eval(v).getSExtValue(); }

 private:
  std::map<llvm::Value*, llvm::APInt> known_;
};

}  // namespace flashjit::test

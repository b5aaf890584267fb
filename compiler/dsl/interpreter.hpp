// Evaluates a checked expression at one point: the reference semantics for every kernel.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "compiler/dsl/ast.hpp"

namespace flashjit::dsl {

// Host view of a tensor declared in the spec: row-major, contiguous, `elem` wide elements.
struct TensorData {
  Type elem = Type::I32;
  const void* data = nullptr;
  std::vector<int64_t> dims;
};

struct Env {
  int32_t b = 0, h = 0, h_kv = 0, q = 0, kv = 0, seq_q = 0, seq_kv = 0;
  float score = 0.0f;
  std::span<const Value> params;         // by slot (Spec::params order)
  std::span<const TensorData> tensors;   // by slot (Spec::tensors order)
};

// A read outside a tensor, or a param/tensor missing from the Env. Kernels never see the
// first: launch checks index ranges with the interval analysis.
class EvalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Semantics (made exact here):
//  - i32 + - * and unary - wrap (two's complement); abs(INT32_MIN) == INT32_MIN.
//  - i32 / and % truncate toward zero. Division by zero is defined, never a trap:
//    x / 0 == 0 and x % 0 == x (so (x / y) * y + x % y == x always holds);
//    INT32_MIN / -1 == INT32_MIN and INT32_MIN % -1 == 0 (the wrapped results).
//  - f32 follows IEEE single precision (expf, tanhf, ... from libm); f32 % is fmodf;
//    min/max on f32 are fminf/fmaxf (a NaN operand yields the other operand).
//  - mixed i32/f32 promotes the i32 operand to f32 (round to nearest); bool never converts.
//  - ?: and where() evaluate only the chosen branch (no branch has side effects anyway).
Value eval(const Expr& e, const Env& env);

bool eval_mask(const Expr& mask, const Env& env);     // mask must be bool
float eval_score(const Expr& score, const Env& env);  // i32 results promote to f32

}  // namespace flashjit::dsl

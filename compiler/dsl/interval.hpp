// Interval arithmetic over expressions: a sound range for every value over a box of inputs.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/dsl/ast.hpp"
#include "compiler/dsl/decl.hpp"

namespace flashjit::dsl {

// Inclusive integer range of an input.
struct IRange {
  int64_t lo = 0, hi = 0;
  static IRange point(int64_t v) { return {v, v}; }
  static IRange any_i32() { return {INT32_MIN, INT32_MAX}; }
};

// The inputs an expression may see. Defaults describe "anything that can happen at launch":
// indices are non-negative and below INT32_MAX, params any value of their type.
struct Bounds {
  IRange b{0, INT32_MAX}, h{0, INT32_MAX}, h_kv{0, INT32_MAX};
  IRange q{0, INT32_MAX}, kv{0, INT32_MAX};
  IRange seq_q{0, INT32_MAX}, seq_kv{0, INT32_MAX};
  double score_lo = -INFINITY, score_hi = INFINITY;
  bool score_nan = true;
  std::vector<std::optional<Value>> params;  // by slot; missing or nullopt = unknown
  const std::vector<TensorDecl>* tensors = nullptr;  // needed for document(t) on [batch, seq]

  // A tile: q in [q0, q1), kv in [kv0, kv1), with the launch's sequence lengths.
  static Bounds tile(int64_t q0, int64_t q1, int64_t kv0, int64_t kv1, int64_t seq_q, int64_t seq_kv);
};

// Abstract value. For i32 and f32 the range is inclusive; f32 bounds may be ±inf and
// `nan` says a NaN is possible. For bool, can_true/can_false.
struct Range {
  Type type = Type::I32;
  int64_t ilo = 0, ihi = 0;
  double flo = 0, fhi = 0;
  bool nan = false;
  bool can_true = false, can_false = false;

  bool definitely_true() const { return type == Type::Bool && can_true && !can_false; }
  bool definitely_false() const { return type == Type::Bool && can_false && !can_true; }
  // Does the concrete value v lie in this range? (the soundness property the tests check)
  bool contains(const Value& v) const;
};

struct AnalysisResult {
  Range value;
  // Some i32 operation may have wrapped around (its exact result left the i32 range).
  // The range is still sound; linear reasoning about the expression is not.
  bool may_wrap = false;
};

// One tensor read seen by the analysis with the range of each index (for launch checks).
struct IndexUse {
  std::string tensor;
  int slot = -1;
  std::vector<IRange> index;
};

AnalysisResult analyze(const Expr& e, const Bounds& bounds, std::vector<IndexUse>* index_uses = nullptr);

}  // namespace flashjit::dsl

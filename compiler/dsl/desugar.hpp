// The meaning of the mask shorthands, written once as ordinary bool expressions (one band form).
#pragma once

#include <vector>

#include "compiler/dsl/ast.hpp"
#include "compiler/dsl/decl.hpp"

namespace flashjit::dsl {

// Replaces every shorthand in a *typed* tree by its definition (typed too):
//   causal        q >= kv
//   causal_br     q + seq_kv - seq_q >= kv        (bottom-right aligned, as FlashAttention 2.1+)
//   window(l, r)  kv >= q - l && kv <= q + r
//   prefix(n)     kv < n
//   document(t)   t[q] == t[kv]   (t[b, q] == t[b, kv] when t is [batch, seq])
// `tensors` is needed only for document(t) (to know whether t has a batch dim).
ExprPtr desugar(const ExprPtr& e, const std::vector<TensorDecl>* tensors);

// Typed node constructors for passes that build trees after checking.
ExprPtr typed_int(int32_t v);
ExprPtr typed_float(float v);
ExprPtr typed_bool(bool v);
ExprPtr typed_var(Builtin v);
ExprPtr typed_binary(BinOp op, ExprPtr a, ExprPtr b);  // result type from the language's rules
ExprPtr typed_unary(UnOp op, ExprPtr a);
ExprPtr typed_call(Fn fn, std::vector<ExprPtr> args);
ExprPtr typed_select(ExprPtr c, ExprPtr a, ExprPtr b);

}  // namespace flashjit::dsl

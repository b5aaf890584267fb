// The mask seen from the keys: the roles of q and kv (and of seq_q and seq_kv) exchanged.
#pragma once

#include "compiler/dsl/ast.hpp"

namespace flashjit::dsl {

// A typed, desugared mask M(q, kv) → M'(q', kv') = M(kv', q') with seq_q and seq_kv exchanged
// too, so the key ranges of M' per query tile of M' are the query ranges of M per key tile of M
// (the transposed tile walk of the FlashAttention-2 backward, Dao 2023, Algorithm 2). Tensor
// reads keep their tensors; only the builtins they are indexed by change.
ExprPtr transpose_mask(const ExprPtr& desugared_mask);

}  // namespace flashjit::dsl

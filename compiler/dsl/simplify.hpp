// Algebraic clean-up of typed trees built by passes (the derivative): folds literals and
// drops neutral elements so the printed result is what a person would write.
#pragma once

#include "compiler/dsl/ast.hpp"

namespace flashjit::dsl {

// Folds literal arithmetic with the interpreter's exact semantics (f32 folds only when the
// result is finite, so every literal prints and parses back), and rewrites x+0, 0+x, x-0,
// 0-x, x*1, 1*x, x*0, 0*x, x/1, -(-x), -(literal), where(c, a, a). x*0 → 0 ignores
// IEEE's 0*inf = NaN: the tree stays the value for every finite x. Types never change.
ExprPtr simplify(const ExprPtr& e);

}  // namespace flashjit::dsl

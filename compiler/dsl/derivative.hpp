// d(score expression)/d(score), symbolic: what the backward pass multiplies dS by.
#pragma once

#include <vector>

#include "compiler/dsl/ast.hpp"
#include "compiler/dsl/diagnostic.hpp"

namespace flashjit::dsl {

// The derivative of a checked score expression with respect to `score`, simplified, typed
// f32, printable in the canonical syntax. Piecewise expressions (where, ?:, min, max, abs)
// differentiate branch by branch, like autograd frameworks: at a switch point the
// derivative is that of the branch taken there.
// Returns nullptr and appends a diagnostic (at the offending node) where the derivative is
// zero almost everywhere or jumps, which would silently drop the gradient:
//   floor(f(score)), f(score) % g or g % f(score), and where/?: whose condition depends on
//   score while both branches do not (a step function of score).
ExprPtr differentiate(const ExprPtr& score, const ExprOrigin& origin, std::vector<Diagnostic>& diags);

}  // namespace flashjit::dsl

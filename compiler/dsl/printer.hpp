// Canonical text of an expression: fixed spacing, minimal parentheses; parse(print(e)) == e.
#pragma once

#include <string>

#include "compiler/dsl/ast.hpp"

namespace flashjit::dsl {

// The canonical form is what the compile cache hashes (via Spec::canonical()), so it
// depends only on the tree: one space around binary operators and ?:, ", " between
// arguments, parentheses only where precedence or left-associativity needs them.
std::string print_expr(const Expr& e);

}  // namespace flashjit::dsl

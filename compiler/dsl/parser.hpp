// Parses one mask/score expression into an (untyped) Expr tree; precedence climbing.
#pragma once

#include <string_view>
#include <vector>

#include "compiler/dsl/ast.hpp"
#include "compiler/dsl/diagnostic.hpp"

namespace flashjit::dsl {

// Limits that keep every later pass (all recursive) far from the stack's end, even under
// ASan; real masks are a few dozen tokens.
inline constexpr size_t kMaxExprTokens = 1024;
inline constexpr int kMaxExprNesting = 64;

// Returns nullptr and appends diagnostics on a syntax error (the first one: after it the
// parser cannot know what the user meant). Names are not resolved here; see typecheck.hpp.
ExprPtr parse_expr(std::string_view text, const ExprOrigin& origin, std::vector<Diagnostic>& diags);

}  // namespace flashjit::dsl

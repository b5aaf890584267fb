// Resolves names and checks types of a parsed expression (i32, f32, bool).
#pragma once

#include <vector>

#include "compiler/dsl/ast.hpp"
#include "compiler/dsl/decl.hpp"
#include "compiler/dsl/diagnostic.hpp"

namespace flashjit::dsl {

// Mask: must be bool, may not read `score`. Score: must be a number and may read `score`;
// an i32 score expression (e.g. "0") is promoted to f32 like any mixed arithmetic, so
// the checked tree keeps type i32 and users of the value take Value::as_f32().
enum class ExprRole : uint8_t { Mask, Score };

struct Scope {
  ExprRole role = ExprRole::Mask;
  const std::vector<Param>* params = nullptr;
  const std::vector<TensorDecl>* tensors = nullptr;
};

// Returns the typed tree (every node typed, params/tensors carry their slot), or nullptr
// after appending one diagnostic per independent error.
ExprPtr check_expr(const ExprPtr& parsed, const Scope& scope, const ExprOrigin& origin, std::vector<Diagnostic>& diags);

// parse_expr + check_expr; throws SpecError with every diagnostic.
ExprPtr compile_expr(std::string_view text, const Scope& scope, const ExprOrigin& origin);

}  // namespace flashjit::dsl

// Tokens of the expression language: C-like operators, numbers, identifiers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/dsl/diagnostic.hpp"

namespace flashjit::dsl {

enum class Tok : uint8_t {
  Int, Float, Ident,
  Plus, Minus, Star, Slash, Percent,
  Lt, Le, Gt, Ge, EqEq, NotEq, AndAnd, OrOr, Bang,
  Question, Colon, LParen, RParen, LBracket, RBracket, Comma,
  End,
};

struct Token {
  Tok kind = Tok::End;
  uint32_t pos = 0;
  uint32_t len = 0;
  std::string_view text;
  uint64_t int_value = 0;   // Int: magnitude (the parser range-checks it, allowing -2^31)
  float float_value = 0.0f;
};

std::string_view token_spelling(Tok t);

// Lexes the whole expression. On error appends diagnostics and returns what it had
// (ending in End) — the parser does not run when the lexer reported anything.
std::vector<Token> lex(std::string_view text, const ExprOrigin& origin, std::vector<Diagnostic>& diags);

}  // namespace flashjit::dsl

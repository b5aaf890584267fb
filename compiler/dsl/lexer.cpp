#include "compiler/dsl/lexer.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace flashjit::dsl {

std::string_view token_spelling(Tok t) {
  switch (t) {
    case Tok::Int: return "integer";
    case Tok::Float: return "number";
    case Tok::Ident: return "name";
    case Tok::Plus: return "'+'";
    case Tok::Minus: return "'-'";
    case Tok::Star: return "'*'";
    case Tok::Slash: return "'/'";
    case Tok::Percent: return "'%'";
    case Tok::Lt: return "'<'";
    case Tok::Le: return "'<='";
    case Tok::Gt: return "'>'";
    case Tok::Ge: return "'>='";
    case Tok::EqEq: return "'=='";
    case Tok::NotEq: return "'!='";
    case Tok::AndAnd: return "'&&'";
    case Tok::OrOr: return "'||'";
    case Tok::Bang: return "'!'";
    case Tok::Question: return "'?'";
    case Tok::Colon: return "':'";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::Comma: return "','";
    case Tok::End: return "end of expression";
  }
  return "?";
}

namespace {
bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
}  // namespace

std::vector<Token> lex(std::string_view s, const ExprOrigin& origin, std::vector<Diagnostic>& diags) {
  std::vector<Token> out;
  size_t i = 0;
  auto push = [&](Tok k, size_t start, size_t len) {
    Token t;
    t.kind = k;
    t.pos = static_cast<uint32_t>(start);
    t.len = static_cast<uint32_t>(len);
    t.text = s.substr(start, len);
    out.push_back(t);
    return &out.back();
  };
  while (i < s.size()) {
    char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') { ++i; continue; }
    size_t start = i;
    if (is_ident_start(c)) {
      while (i < s.size() && is_ident_char(s[i])) ++i;
      push(Tok::Ident, start, i - start);
      continue;
    }
    if (is_digit(c) || (c == '.' && i + 1 < s.size() && is_digit(s[i + 1]))) {
      bool is_float = false;
      while (i < s.size() && is_digit(s[i])) ++i;
      if (i < s.size() && s[i] == '.') {
        is_float = true;
        ++i;
        while (i < s.size() && is_digit(s[i])) ++i;
      }
      if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
        if (j < s.size() && is_digit(s[j])) {
          is_float = true;
          i = j;
          while (i < s.size() && is_digit(s[i])) ++i;
        }
      }
      if (i < s.size() && is_ident_char(s[i])) {
        while (i < s.size() && is_ident_char(s[i])) ++i;
        diags.push_back(origin.at(start, i - start, "malformed number '" + std::string(s.substr(start, i - start)) + "'"));
        continue;
      }
      std::string_view txt = s.substr(start, i - start);
      Token* t = push(is_float ? Tok::Float : Tok::Int, start, i - start);
      if (is_float) {
        float v = 0;
        auto r = std::from_chars(txt.data(), txt.data() + txt.size(), v);
        if (r.ec == std::errc::result_out_of_range || (r.ec == std::errc() && std::isinf(v))) {
          diags.push_back(origin.at(start, txt.size(), "number '" + std::string(txt) + "' is out of the range of f32"));
        } else if (r.ec != std::errc()) {
          diags.push_back(origin.at(start, txt.size(), "malformed number '" + std::string(txt) + "'"));
        }
        t->float_value = v;
      } else {
        uint64_t v = 0;
        auto r = std::from_chars(txt.data(), txt.data() + txt.size(), v);
        if (r.ec != std::errc() || v > (uint64_t{1} << 31)) {
          diags.push_back(origin.at(start, txt.size(), "integer '" + std::string(txt) + "' does not fit in i32"));
          v = 0;
        }
        t->int_value = v;
      }
      continue;
    }
    auto two = [&](char next) { return i + 1 < s.size() && s[i + 1] == next; };
    switch (c) {
      case '+': push(Tok::Plus, start, 1); ++i; continue;
      case '-': push(Tok::Minus, start, 1); ++i; continue;
      case '*': push(Tok::Star, start, 1); ++i; continue;
      case '/': push(Tok::Slash, start, 1); ++i; continue;
      case '%': push(Tok::Percent, start, 1); ++i; continue;
      case '?': push(Tok::Question, start, 1); ++i; continue;
      case ':': push(Tok::Colon, start, 1); ++i; continue;
      case '(': push(Tok::LParen, start, 1); ++i; continue;
      case ')': push(Tok::RParen, start, 1); ++i; continue;
      case '[': push(Tok::LBracket, start, 1); ++i; continue;
      case ']': push(Tok::RBracket, start, 1); ++i; continue;
      case ',': push(Tok::Comma, start, 1); ++i; continue;
      case '<': if (two('=')) { push(Tok::Le, start, 2); i += 2; } else { push(Tok::Lt, start, 1); ++i; } continue;
      case '>': if (two('=')) { push(Tok::Ge, start, 2); i += 2; } else { push(Tok::Gt, start, 1); ++i; } continue;
      case '!': if (two('=')) { push(Tok::NotEq, start, 2); i += 2; } else { push(Tok::Bang, start, 1); ++i; } continue;
      case '=':
        if (two('=')) { push(Tok::EqEq, start, 2); i += 2; continue; }
        diags.push_back(origin.at(start, 1, "'=' is not an operator; did you mean '=='?"));
        ++i;
        continue;
      case '&':
        if (two('&')) { push(Tok::AndAnd, start, 2); i += 2; continue; }
        diags.push_back(origin.at(start, 1, "'&' is not an operator; did you mean '&&'?"));
        ++i;
        continue;
      case '|':
        if (two('|')) { push(Tok::OrOr, start, 2); i += 2; continue; }
        diags.push_back(origin.at(start, 1, "'|' is not an operator; did you mean '||'?"));
        ++i;
        continue;
      default: break;
    }
    // Report a multi-byte UTF-8 character as one unit.
    size_t n = 1;
    while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
    std::string shown = std::isprint(static_cast<unsigned char>(c)) || (static_cast<unsigned char>(c) >= 0x80 && n > 1)
                            ? "'" + std::string(s.substr(i, n)) + "'"
                            : "byte 0x" + [&] { char b[8]; std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(c)); return std::string(b); }();
    diags.push_back(origin.at(start, n, "unexpected character " + shown));
    i += n;
  }
  push(Tok::End, s.size(), 0);
  return out;
}

}  // namespace flashjit::dsl

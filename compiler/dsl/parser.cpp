#include "compiler/dsl/parser.hpp"

#include "compiler/dsl/lexer.hpp"

namespace flashjit::dsl {

namespace {

struct SyntaxError {};

class Parser {
 public:
  Parser(std::vector<Token> toks, const ExprOrigin& origin, std::vector<Diagnostic>& diags)
      : toks_(std::move(toks)), origin_(origin), diags_(diags) {}

  ExprPtr parse() {
    ExprPtr e = parse_ternary();
    if (peek().kind != Tok::End) {
      const Token& t = peek();
      if (t.kind == Tok::RParen) fail(t, "unmatched ')'");
      fail(t, "expected an operator or the end of the expression, found " + describe(t));
    }
    return e;
  }

 private:
  const Token& peek(size_t k = 0) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  const Token& next() { const Token& t = toks_[i_]; if (i_ + 1 < toks_.size()) ++i_; return t; }
  bool accept(Tok k) { if (peek().kind == k) { next(); return true; } return false; }

  static std::string describe(const Token& t) {
    if (t.kind == Tok::End) return "the end of the expression";
    return "'" + std::string(t.text) + "'";
  }

  [[noreturn]] void fail(const Token& t, std::string msg) {
    diags_.push_back(origin_.at(t.pos, t.kind == Tok::End ? 1 : t.len, std::move(msg)));
    throw SyntaxError{};
  }

  const Token& expect(Tok k, std::string_view context) {
    if (peek().kind != k)
      fail(peek(), "expected " + std::string(token_spelling(k)) + " " + std::string(context) + ", found " + describe(peek()));
    return next();
  }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& p_) : p(p_) {
      if (++p.depth_ > kMaxExprNesting)
        p.fail(p.peek(), "expression nested too deeply (more than " + std::to_string(kMaxExprNesting) + " levels)");
    }
    ~DepthGuard() { --p.depth_; }
  };

  ExprPtr parse_ternary() {
    DepthGuard g(*this);
    ExprPtr c = parse_binary(2);
    if (peek().kind != Tok::Question) return c;
    const Token& q = next();
    ExprPtr a = parse_ternary();
    if (peek().kind != Tok::Colon) fail(peek(), "expected ':' to complete the '?' at column " + std::to_string(q.pos + 1) + ", found " + describe(peek()));
    next();
    ExprPtr b = parse_ternary();
    return make_select(std::move(c), std::move(a), std::move(b), q.pos, q.len);
  }

  static int precedence(Tok t) {
    switch (t) {
      case Tok::OrOr: return 2;
      case Tok::AndAnd: return 3;
      case Tok::EqEq: case Tok::NotEq: return 4;
      case Tok::Lt: case Tok::Le: case Tok::Gt: case Tok::Ge: return 5;
      case Tok::Plus: case Tok::Minus: return 6;
      case Tok::Star: case Tok::Slash: case Tok::Percent: return 7;
      default: return 0;
    }
  }
  static BinOp binop(Tok t) {
    switch (t) {
      case Tok::Plus: return BinOp::Add;
      case Tok::Minus: return BinOp::Sub;
      case Tok::Star: return BinOp::Mul;
      case Tok::Slash: return BinOp::Div;
      case Tok::Percent: return BinOp::Mod;
      case Tok::Lt: return BinOp::Lt;
      case Tok::Le: return BinOp::Le;
      case Tok::Gt: return BinOp::Gt;
      case Tok::Ge: return BinOp::Ge;
      case Tok::EqEq: return BinOp::Eq;
      case Tok::NotEq: return BinOp::Ne;
      case Tok::AndAnd: return BinOp::And;
      default: return BinOp::Or;
    }
  }

  // All binary operators are left-associative (as in C).
  ExprPtr parse_binary(int min_prec) {
    ExprPtr lhs = parse_unary();
    for (;;) {
      int p = precedence(peek().kind);
      if (p == 0 || p < min_prec) return lhs;
      const Token& op = next();
      DepthGuard g(*this);
      ExprPtr rhs = parse_binary(p + 1);
      lhs = make_binary(binop(op.kind), std::move(lhs), std::move(rhs), op.pos, op.len);
    }
  }

  ExprPtr parse_unary() {
    DepthGuard g(*this);
    const Token& t = peek();
    if (t.kind == Tok::Minus) {
      next();
      // -2147483648 is the one literal whose magnitude does not fit in i32 by itself.
      if (peek().kind == Tok::Int && peek().int_value == (uint64_t{1} << 31)) {
        const Token& lit = next();
        return make_int(INT32_MIN, t.pos, lit.pos + lit.len - t.pos);
      }
      ExprPtr a = parse_unary();
      // Negative literals are literals, so the printer's "-3" reads back as the same tree.
      if (a->kind == ExprKind::IntLit)
        return make_int(static_cast<int32_t>(0u - static_cast<uint32_t>(a->int_value)), t.pos, a->pos + a->len - t.pos);
      if (a->kind == ExprKind::FloatLit) return make_float(-a->float_value, t.pos, a->pos + a->len - t.pos);
      return make_unary(UnOp::Neg, std::move(a), t.pos, t.len);
    }
    if (t.kind == Tok::Bang) {
      next();
      ExprPtr a = parse_unary();
      return make_unary(UnOp::Not, std::move(a), t.pos, t.len);
    }
    if (t.kind == Tok::Plus) fail(t, "unary '+' is not part of the language; remove it");
    return parse_primary();
  }

  std::vector<ExprPtr> parse_args(const Token& name, Tok close, std::string_view what) {
    std::vector<ExprPtr> args;
    if (accept(close)) return args;
    for (;;) {
      args.push_back(parse_ternary());
      if (accept(Tok::Comma)) continue;
      if (peek().kind == close) { next(); return args; }
      fail(peek(), "expected ',' or " + std::string(token_spelling(close)) + " in the " + std::string(what) + " of '" +
                       std::string(name.text) + "', found " + describe(peek()));
    }
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::Int:
        next();
        if (t.int_value > static_cast<uint64_t>(INT32_MAX)) fail(t, "integer '" + std::string(t.text) + "' does not fit in i32");
        return make_int(static_cast<int32_t>(t.int_value), t.pos, t.len);
      case Tok::Float:
        next();
        return make_float(t.float_value, t.pos, t.len);
      case Tok::LParen: {
        next();
        ExprPtr e = parse_ternary();
        if (peek().kind != Tok::RParen)
          fail(peek(), "expected ')' to close the '(' at column " + std::to_string(t.pos + 1) + ", found " + describe(peek()));
        next();
        return e;
      }
      case Tok::Ident: return parse_name();
      case Tok::End: fail(t, "expected an expression, found the end of the expression");
      default: fail(t, "expected an expression, found " + describe(t));
    }
  }

  ExprPtr parse_name() {
    const Token t = next();
    std::string_view s = t.text;
    const bool call = peek().kind == Tok::LParen;
    const bool index = peek().kind == Tok::LBracket;
    if (s == "true" || s == "false") {
      if (call || index) fail(t, "'" + std::string(s) + "' is a bool literal");
      return make_bool(s == "true", t.pos, t.len);
    }
    if (auto v = builtin_from_name(s)) {
      if (call) fail(t, "'" + std::string(s) + "' is a variable, not a function");
      if (index) fail(t, "'" + std::string(s) + "' is a variable, not a tensor");
      return make_var(*v, t.pos, t.len);
    }
    // Function and shorthand names are keywords only before '(': a param may be called
    // `window` (the README's own example), and `window(l, r)` is still the shorthand.
    if (auto f = fn_from_name(s); f && call) {
      next();
      auto args = parse_args(t, Tok::RParen, "arguments");
      size_t n = fn_arity(*f);
      if (args.size() != n)
        fail(t, "'" + std::string(s) + "' takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") + ", got " + std::to_string(args.size()));
      return make_call(*f, std::move(args), t.pos, t.len);
    }
    if (auto sh = shorthand_from_name(s); sh && (call || *sh == Shorthand::Causal || *sh == Shorthand::CausalBr))
      return parse_shorthand(*sh, t, call);
    if (call) {
      std::vector<std::string> cands;
      for (int i = 0; i < 10; ++i) cands.emplace_back(fn_name(static_cast<Fn>(i)));
      for (int i = 0; i < 5; ++i) cands.emplace_back(shorthand_name(static_cast<Shorthand>(i)));
      std::string hint = did_you_mean(s, cands);
      fail(t, "unknown function '" + std::string(s) + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?"));
    }
    if (index) {
      next();
      auto idx = parse_args(t, Tok::RBracket, "index");
      if (idx.empty()) fail(t, "tensor '" + std::string(s) + "' needs at least one index");
      return make_tensor_read(std::string(s), std::move(idx), t.pos, t.len);
    }
    return make_param(std::string(s), t.pos, t.len);
  }

  ExprPtr parse_shorthand(Shorthand sh, const Token& t, bool call) {
    std::string name(t.text);
    switch (sh) {
      case Shorthand::Causal:
      case Shorthand::CausalBr:
        if (call) fail(t, "'" + name + "' takes no arguments; write it without parentheses");
        return make_shorthand(sh, {}, {}, t.pos, t.len);
      case Shorthand::Document: {
        next();
        const Token& arg = peek();
        if (arg.kind != Tok::Ident) fail(arg, "document(t) takes the name of an i32 tensor, found " + describe(arg));
        next();
        expect(Tok::RParen, "after the tensor name of document(t)");
        return make_shorthand(sh, {}, std::string(arg.text), t.pos, t.len);
      }
      case Shorthand::Window:
      case Shorthand::Prefix: {
        size_t n = sh == Shorthand::Window ? 2 : 1;
        const char* usage = sh == Shorthand::Window ? "window(left, right)" : "prefix(n)";
        next();
        auto args = parse_args(t, Tok::RParen, "arguments");
        if (args.size() != n)
          fail(t, "'" + name + "' takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") + " (" + usage + "), got " + std::to_string(args.size()));
        return make_shorthand(sh, std::move(args), {}, t.pos, t.len);
      }
    }
    fail(t, "internal: unknown shorthand");
  }

  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
  const ExprOrigin& origin_;
  std::vector<Diagnostic>& diags_;
};

}  // namespace

ExprPtr parse_expr(std::string_view text, const ExprOrigin& origin, std::vector<Diagnostic>& diags) {
  size_t before = diags.size();
  std::vector<Token> toks = lex(text, origin, diags);
  if (diags.size() != before) return nullptr;
  if (toks.size() == 1) {
    diags.push_back(origin.at(0, 1, "empty expression"));
    return nullptr;
  }
  if (toks.size() - 1 > kMaxExprTokens) {
    diags.push_back(origin.at(toks[kMaxExprTokens].pos, 1,
                              "expression is too long (" + std::to_string(toks.size() - 1) + " tokens; the limit is " +
                                  std::to_string(kMaxExprTokens) + ")"));
    return nullptr;
  }
  Parser p(std::move(toks), origin, diags);
  try {
    return p.parse();
  } catch (const SyntaxError&) {
    return nullptr;
  }
}

}  // namespace flashjit::dsl

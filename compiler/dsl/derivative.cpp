#include "compiler/dsl/derivative.hpp"

#include "compiler/dsl/desugar.hpp"
#include "compiler/dsl/simplify.hpp"

namespace flashjit::dsl {

namespace {

struct NotDifferentiable {};

class Differ {
 public:
  Differ(const ExprOrigin& o, std::vector<Diagnostic>& d) : origin_(o), diags_(d) {}

  ExprPtr d(const ExprPtr& e) {
    if (!mentions(*e, Builtin::Score)) return zero();
    switch (e->kind) {
      case ExprKind::Var: return one();
      case ExprKind::Unary: return typed_unary(UnOp::Neg, d(e->args[0]));
      case ExprKind::Binary: return binary(e);
      case ExprKind::Select: return select(e, false);
      case ExprKind::Call: return call(e);
      default: return zero();  // tensor indices are i32 and cannot depend on score
    }
  }

 private:
  static ExprPtr zero() { return typed_float(0.0f); }
  static ExprPtr one() { return typed_float(1.0f); }
  static ExprPtr mul(ExprPtr a, ExprPtr b) { return typed_binary(BinOp::Mul, std::move(a), std::move(b)); }

  [[noreturn]] void fail(const Expr& at, const std::string& msg) {
    diags_.push_back(origin_.at(at.pos, std::max<uint32_t>(at.len, 1), msg));
    throw NotDifferentiable{};
  }

  ExprPtr binary(const ExprPtr& e) {
    const ExprPtr& a = e->args[0];
    const ExprPtr& b = e->args[1];
    switch (e->bin) {
      case BinOp::Add: return typed_binary(BinOp::Add, d(a), d(b));
      case BinOp::Sub: return typed_binary(BinOp::Sub, d(a), d(b));
      case BinOp::Mul: return typed_binary(BinOp::Add, mul(d(a), b), mul(a, d(b)));
      case BinOp::Div:
        if (!mentions(*b, Builtin::Score)) return typed_binary(BinOp::Div, d(a), b);
        // (a'b - ab') / b²
        return typed_binary(BinOp::Div, typed_binary(BinOp::Sub, mul(d(a), b), mul(a, d(b))), mul(b, b));
      case BinOp::Mod:
        fail(*e, "'%' is not differentiable in score: it jumps at every multiple of its divisor, so the backward pass "
                 "would be wrong there; rewrite without '%' on score");
      default:
        fail(*e, "internal: a comparison cannot be a score value");
    }
  }

  ExprPtr select(const ExprPtr& e, bool where) {
    const ExprPtr& c = e->args[0];
    const ExprPtr& x = e->args[1];
    const ExprPtr& y = e->args[2];
    if (mentions(*c, Builtin::Score) && !mentions(*x, Builtin::Score) && !mentions(*y, Builtin::Score))
      fail(*e, std::string(where ? "where(c, a, b)" : "c ? a : b") +
                   " is a step function of score here (the condition reads score, the branches do not): its derivative "
                   "is 0 almost everywhere and the backward pass would get no gradient");
    ExprPtr dx = d(x), dy = d(y);
    return where ? typed_call(Fn::Where, {c, dx, dy}) : typed_select(c, dx, dy);
  }

  ExprPtr call(const ExprPtr& e) {
    const ExprPtr& a = e->args[0];
    switch (e->fn) {
      case Fn::Where: return select(e, true);
      case Fn::Min:
      case Fn::Max: {
        const ExprPtr& b = e->args[1];
        auto c = typed_binary(e->fn == Fn::Min ? BinOp::Le : BinOp::Ge, a, b);
        return typed_call(Fn::Where, {c, d(a), d(b)});
      }
      case Fn::Abs:
        return typed_call(Fn::Where, {typed_binary(BinOp::Ge, a, typed_float(0.0f)), d(a), typed_unary(UnOp::Neg, d(a))});
      case Fn::Exp: return mul(typed_call(Fn::Exp, {a}), d(a));
      case Fn::Exp2: return mul(mul(typed_call(Fn::Exp2, {a}), typed_float(0.693147182f)), d(a));  // ln 2
      case Fn::Log: return typed_binary(BinOp::Div, d(a), a);
      case Fn::Tanh: {
        auto t = typed_call(Fn::Tanh, {a});
        return mul(typed_binary(BinOp::Sub, one(), mul(t, t)), d(a));
      }
      case Fn::Sqrt: return typed_binary(BinOp::Div, d(a), mul(typed_float(2.0f), typed_call(Fn::Sqrt, {a})));
      case Fn::Floor:
        fail(*e, "floor() of score is not differentiable: it is a step function (derivative 0 almost everywhere), so "
                 "the backward pass would get no gradient; drop floor() or apply it to something other than score");
    }
    return zero();
  }

  const ExprOrigin& origin_;
  std::vector<Diagnostic>& diags_;
};

}  // namespace

ExprPtr differentiate(const ExprPtr& score, const ExprOrigin& origin, std::vector<Diagnostic>& diags) {
  try {
    return simplify(Differ(origin, diags).d(score));
  } catch (const NotDifferentiable&) {
    return nullptr;
  }
}

}  // namespace flashjit::dsl

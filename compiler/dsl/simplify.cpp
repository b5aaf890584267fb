#include "compiler/dsl/simplify.hpp"

#include <cmath>

#include "compiler/dsl/desugar.hpp"
#include "compiler/dsl/interpreter.hpp"

namespace flashjit::dsl {

namespace {

bool is_lit(const ExprPtr& e) { return e->kind == ExprKind::IntLit || e->kind == ExprKind::FloatLit; }
bool is_num(const ExprPtr& e, double v) {
  if (e->kind == ExprKind::IntLit) return e->int_value == v;
  if (e->kind == ExprKind::FloatLit) return e->float_value == v;
  return false;
}
ExprPtr lit_of(const Value& v) { return v.type == Type::I32 ? typed_int(v.i) : typed_float(v.f); }
// `keep` may replace a node only if it already has the node's type.
bool fits(const ExprPtr& keep, const Expr& node) { return keep->type == node.type; }
ExprPtr zero_like(const Expr& node) { return node.type == Type::I32 ? typed_int(0) : typed_float(0.0f); }

}  // namespace

ExprPtr simplify(const ExprPtr& e) {
  std::vector<ExprPtr> args;
  bool changed = false;
  for (const auto& a : e->args) {
    args.push_back(simplify(a));
    changed |= args.back() != a;
  }
  ExprPtr n = changed ? with_type(*e, e->type, args, e->slot) : e;
  if (!n->typed) return n;
  switch (n->kind) {
    case ExprKind::Unary: {
      const ExprPtr& a = args[0];
      if (n->un != UnOp::Neg) break;
      if (is_lit(a)) {
        Value v = eval(*n, Env{});
        if (v.type == Type::I32 || std::isfinite(v.f)) return lit_of(v);
      }
      if (a->kind == ExprKind::Unary && a->un == UnOp::Neg) return a->args[0];
      break;
    }
    case ExprKind::Binary: {
      if (!is_arithmetic(n->bin)) break;
      const ExprPtr& a = args[0];
      const ExprPtr& b = args[1];
      if (is_lit(a) && is_lit(b)) {
        Value v = eval(*n, Env{});
        if (v.type == Type::I32 || std::isfinite(v.f)) return lit_of(v);
      }
      switch (n->bin) {
        case BinOp::Add:
          if (is_num(b, 0) && fits(a, *n)) return a;
          if (is_num(a, 0) && fits(b, *n)) return b;
          break;
        case BinOp::Sub:
          if (is_num(b, 0) && fits(a, *n)) return a;
          if (is_num(a, 0) && fits(b, *n)) return simplify(typed_unary(UnOp::Neg, b));
          break;
        case BinOp::Mul:
          if (is_num(a, 0) || is_num(b, 0)) return zero_like(*n);
          if (is_num(b, 1) && fits(a, *n)) return a;
          if (is_num(a, 1) && fits(b, *n)) return b;
          if (is_num(b, -1) && fits(a, *n)) return simplify(typed_unary(UnOp::Neg, a));
          if (is_num(a, -1) && fits(b, *n)) return simplify(typed_unary(UnOp::Neg, b));
          break;
        case BinOp::Div:
          if (is_num(b, 1) && fits(a, *n)) return a;
          if (is_num(a, 0) && n->type == Type::F32) return zero_like(*n);
          break;
        default: break;
      }
      break;
    }
    case ExprKind::Select:
    case ExprKind::Call: {
      bool sel = n->kind == ExprKind::Select || n->fn == Fn::Where;
      if (!sel) break;
      if (same_expr(*args[1], *args[2]) && fits(args[1], *n)) return args[1];
      if (args[0]->kind == ExprKind::BoolLit && fits(args[1], *n) && fits(args[2], *n))
        return args[0]->bool_value ? args[1] : args[2];
      break;
    }
    default: break;
  }
  return n;
}

}  // namespace flashjit::dsl

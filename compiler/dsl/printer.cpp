#include "compiler/dsl/printer.hpp"

#include <cmath>

namespace flashjit::dsl {

namespace {

constexpr int kPrecSelect = 1;
constexpr int kPrecUnary = 8;
constexpr int kPrecPrimary = 9;

int binop_prec(BinOp op) {
  switch (op) {
    case BinOp::Or: return 2;
    case BinOp::And: return 3;
    case BinOp::Eq: case BinOp::Ne: return 4;
    case BinOp::Lt: case BinOp::Le: case BinOp::Gt: case BinOp::Ge: return 5;
    case BinOp::Add: case BinOp::Sub: return 6;
    default: return 7;
  }
}

int prec_of(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Select: return kPrecSelect;
    case ExprKind::Binary: return binop_prec(e.bin);
    case ExprKind::Unary: return kPrecUnary;
    // "-3" reads back as a literal, but it binds like a unary minus.
    case ExprKind::IntLit: return e.int_value < 0 ? kPrecUnary : kPrecPrimary;
    case ExprKind::FloatLit: return std::signbit(e.float_value) ? kPrecUnary : kPrecPrimary;
    default: return kPrecPrimary;
  }
}

void print(const Expr& e, int min_prec, std::string& out);

void print_list(const std::vector<ExprPtr>& args, std::string& out) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) out += ", ";
    print(*args[i], 0, out);
  }
}

void print(const Expr& e, int min_prec, std::string& out) {
  const bool parens = prec_of(e) < min_prec;
  if (parens) out += '(';
  switch (e.kind) {
    case ExprKind::IntLit: out += std::to_string(e.int_value); break;
    case ExprKind::FloatLit: out += format_f32(e.float_value); break;
    case ExprKind::BoolLit: out += e.bool_value ? "true" : "false"; break;
    case ExprKind::Var: out += builtin_name(e.var); break;
    case ExprKind::Param: out += e.name; break;
    case ExprKind::TensorRead:
      out += e.name;
      out += '[';
      print_list(e.args, out);
      out += ']';
      break;
    case ExprKind::Unary: {
      out += e.un == UnOp::Neg ? '-' : '!';
      std::string inner;
      print(*e.args[0], kPrecUnary, inner);
      // "- -x", not "--x": the language has no decrement, but readers do.
      if (!inner.empty() && inner[0] == '-' && e.un == UnOp::Neg) out += ' ';
      out += inner;
      break;
    }
    case ExprKind::Binary: {
      int p = binop_prec(e.bin);
      print(*e.args[0], p, out);
      out += ' ';
      out += binop_spelling(e.bin);
      out += ' ';
      print(*e.args[1], p + 1, out);
      break;
    }
    case ExprKind::Select:
      print(*e.args[0], kPrecSelect + 1, out);
      out += " ? ";
      print(*e.args[1], 0, out);
      out += " : ";
      print(*e.args[2], kPrecSelect, out);
      break;
    case ExprKind::Call:
      out += fn_name(e.fn);
      out += '(';
      print_list(e.args, out);
      out += ')';
      break;
    case ExprKind::Shorthand:
      out += shorthand_name(e.sh);
      if (e.sh == Shorthand::Document) {
        out += '(' + e.name + ')';
      } else if (!e.args.empty()) {
        out += '(';
        print_list(e.args, out);
        out += ')';
      }
      break;
  }
  if (parens) out += ')';
}

}  // namespace

std::string print_expr(const Expr& e) {
  std::string out;
  print(e, 0, out);
  return out;
}

}  // namespace flashjit::dsl

#include "compiler/dsl/ast.hpp"

#include <cmath>
#include <cstring>

namespace flashjit::dsl {

namespace {
std::shared_ptr<Expr> node(ExprKind k, uint32_t pos, uint32_t len) {
  auto e = std::make_shared<Expr>();
  e->kind = k;
  e->pos = pos;
  e->len = len;
  return e;
}
}  // namespace

ExprPtr make_int(int32_t v, uint32_t pos, uint32_t len) {
  auto e = node(ExprKind::IntLit, pos, len);
  e->int_value = v;
  return e;
}
ExprPtr make_float(float v, uint32_t pos, uint32_t len) {
  auto e = node(ExprKind::FloatLit, pos, len);
  e->float_value = v;
  return e;
}
ExprPtr make_bool(bool v, uint32_t pos, uint32_t len) {
  auto e = node(ExprKind::BoolLit, pos, len);
  e->bool_value = v;
  return e;
}
ExprPtr make_var(Builtin v, uint32_t pos, uint32_t len) {
  auto e = node(ExprKind::Var, pos, len);
  e->var = v;
  return e;
}
ExprPtr make_param(std::string name, uint32_t pos, uint32_t len) {
  auto e = node(ExprKind::Param, pos, len);
  e->name = std::move(name);
  return e;
}
ExprPtr make_tensor_read(std::string name, std::vector<ExprPtr> indices, uint32_t pos, uint32_t len) {
  auto e = node(ExprKind::TensorRead, pos, len);
  e->name = std::move(name);
  e->args = std::move(indices);
  return e;
}
ExprPtr make_unary(UnOp op, ExprPtr a, uint32_t pos, uint32_t len) {
  auto e = node(ExprKind::Unary, pos, len);
  e->un = op;
  e->args = {std::move(a)};
  return e;
}
ExprPtr make_binary(BinOp op, ExprPtr a, ExprPtr b, uint32_t pos, uint32_t len) {
  auto e = node(ExprKind::Binary, pos, len);
  e->bin = op;
  e->args = {std::move(a), std::move(b)};
  return e;
}
ExprPtr make_select(ExprPtr c, ExprPtr a, ExprPtr b, uint32_t pos, uint32_t len) {
  auto e = node(ExprKind::Select, pos, len);
  e->args = {std::move(c), std::move(a), std::move(b)};
  return e;
}
ExprPtr make_call(Fn fn, std::vector<ExprPtr> args, uint32_t pos, uint32_t len) {
  auto e = node(ExprKind::Call, pos, len);
  e->fn = fn;
  e->args = std::move(args);
  return e;
}
ExprPtr make_shorthand(Shorthand s, std::vector<ExprPtr> args, std::string tensor, uint32_t pos, uint32_t len) {
  auto e = node(ExprKind::Shorthand, pos, len);
  e->sh = s;
  e->args = std::move(args);
  e->name = std::move(tensor);
  return e;
}

ExprPtr with_type(const Expr& e, Type t, std::vector<ExprPtr> args, int slot) {
  auto c = std::make_shared<Expr>(e);
  c->type = t;
  c->typed = true;
  c->args = std::move(args);
  if (slot >= 0) c->slot = slot;
  return c;
}

namespace {
constexpr const char* kBuiltins[] = {"b", "h", "h_kv", "q", "kv", "seq_q", "seq_kv", "score"};
constexpr const char* kFns[] = {"min", "max", "abs", "exp", "exp2", "log", "tanh", "sqrt", "floor", "where"};
constexpr const char* kShorthands[] = {"causal", "causal_br", "window", "prefix", "document"};
constexpr const char* kBinops[] = {"+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||"};
}  // namespace

std::string_view builtin_name(Builtin v) { return kBuiltins[static_cast<int>(v)]; }
std::optional<Builtin> builtin_from_name(std::string_view s) {
  for (int i = 0; i < 8; ++i)
    if (s == kBuiltins[i]) return static_cast<Builtin>(i);
  return std::nullopt;
}
std::string_view binop_spelling(BinOp op) { return kBinops[static_cast<int>(op)]; }
std::string_view fn_name(Fn fn) { return kFns[static_cast<int>(fn)]; }
std::optional<Fn> fn_from_name(std::string_view s) {
  for (int i = 0; i < 10; ++i)
    if (s == kFns[i]) return static_cast<Fn>(i);
  return std::nullopt;
}
std::string_view shorthand_name(Shorthand s) { return kShorthands[static_cast<int>(s)]; }
std::optional<Shorthand> shorthand_from_name(std::string_view s) {
  for (int i = 0; i < 5; ++i)
    if (s == kShorthands[i]) return static_cast<Shorthand>(i);
  return std::nullopt;
}
size_t fn_arity(Fn fn) {
  switch (fn) {
    case Fn::Min: case Fn::Max: return 2;
    case Fn::Where: return 3;
    default: return 1;
  }
}
bool is_comparison(BinOp op) { return op >= BinOp::Lt && op <= BinOp::Ne; }
bool is_arithmetic(BinOp op) { return op <= BinOp::Mod; }

const std::vector<std::string>& reserved_words() {
  static const std::vector<std::string> words = [] {
    std::vector<std::string> w;
    for (auto* s : kBuiltins) w.emplace_back(s);
    w.emplace_back("causal");
    w.emplace_back("causal_br");
    w.emplace_back("true");
    w.emplace_back("false");
    return w;
  }();
  return words;
}

bool same_expr(const Expr& a, const Expr& b) {
  if (a.kind != b.kind || a.args.size() != b.args.size()) return false;
  switch (a.kind) {
    case ExprKind::IntLit: if (a.int_value != b.int_value) return false; break;
    case ExprKind::FloatLit:
      // Bitwise: -0.0 and 0.0 print differently, so they are different trees.
      if (std::memcmp(&a.float_value, &b.float_value, sizeof(float)) != 0) return false;
      break;
    case ExprKind::BoolLit: if (a.bool_value != b.bool_value) return false; break;
    case ExprKind::Var: if (a.var != b.var) return false; break;
    case ExprKind::Param: case ExprKind::TensorRead: if (a.name != b.name) return false; break;
    case ExprKind::Unary: if (a.un != b.un) return false; break;
    case ExprKind::Binary: if (a.bin != b.bin) return false; break;
    case ExprKind::Select: break;
    case ExprKind::Call: if (a.fn != b.fn) return false; break;
    case ExprKind::Shorthand: if (a.sh != b.sh || a.name != b.name) return false; break;
  }
  for (size_t i = 0; i < a.args.size(); ++i)
    if (!same_expr(*a.args[i], *b.args[i])) return false;
  return true;
}

bool mentions(const Expr& e, Builtin v) {
  if (e.kind == ExprKind::Var && e.var == v) return true;
  if (e.kind == ExprKind::Shorthand && (v == Builtin::Q || v == Builtin::Kv)) return true;
  if (e.kind == ExprKind::Shorthand && e.sh == Shorthand::CausalBr && (v == Builtin::SeqQ || v == Builtin::SeqKv)) return true;
  for (const auto& a : e.args)
    if (mentions(*a, v)) return true;
  return false;
}

bool reads_tensor(const Expr& e) {
  if (e.kind == ExprKind::TensorRead) return true;
  if (e.kind == ExprKind::Shorthand && e.sh == Shorthand::Document) return true;
  for (const auto& a : e.args)
    if (reads_tensor(*a)) return true;
  return false;
}

size_t node_count(const Expr& e) {
  size_t n = 1;
  for (const auto& a : e.args) n += node_count(*a);
  return n;
}

}  // namespace flashjit::dsl

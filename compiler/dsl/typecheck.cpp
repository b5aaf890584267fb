#include "compiler/dsl/typecheck.hpp"

#include "compiler/dsl/parser.hpp"

namespace flashjit::dsl {

namespace {

// Err stops cascades: one mistake gives one message, not one per enclosing operator.
enum class T : uint8_t { I32, F32, Bool, Err };

T from(Type t) { return t == Type::I32 ? T::I32 : t == Type::F32 ? T::F32 : T::Bool; }
Type to(T t) { return t == T::F32 ? Type::F32 : t == T::Bool ? Type::Bool : Type::I32; }
std::string tname(T t) { return t == T::Err ? "?" : std::string(type_name(to(t))); }
bool numeric(T t) { return t == T::I32 || t == T::F32; }
T promote(T a, T b) { return a == T::I32 && b == T::I32 ? T::I32 : T::F32; }

// Which launch extent a bare index variable walks over.
std::optional<Extent::Kind> var_extent(Builtin v) {
  switch (v) {
    case Builtin::B: return Extent::Kind::Batch;
    case Builtin::H: return Extent::Kind::HeadsQ;
    case Builtin::HKv: return Extent::Kind::HeadsKv;
    case Builtin::Q: return Extent::Kind::SeqQ;
    case Builtin::Kv: return Extent::Kind::SeqKv;
    default: return std::nullopt;
  }
}
bool is_seq(Extent::Kind k) { return k == Extent::Kind::SeqQ || k == Extent::Kind::SeqKv; }

class Checker {
 public:
  Checker(const Scope& s, const ExprOrigin& o, std::vector<Diagnostic>& d) : scope_(s), origin_(o), diags_(d) {}

  ExprPtr run(const ExprPtr& root) {
    auto [e, t] = check(*root);
    if (t == T::Err) return nullptr;
    if (scope_.role == ExprRole::Mask && t != T::Bool)
      error(*root, "the mask must be a bool expression (true = attend), but this is " + tname(t) +
                       "; compare it, e.g. q - kv < " + (t == T::I32 ? "window" : "x"));
    if (scope_.role == ExprRole::Score && t == T::Bool)
      error(*root, "the score must be a number (f32), but this is bool; use where(cond, score, -inf-like value)");
    return failed_ ? nullptr : e;
  }

 private:
  struct R {
    ExprPtr e;
    T t;
  };

  void error(const Expr& at, std::string msg) {
    failed_ = true;
    diags_.push_back(origin_.at(at.pos, std::max<uint32_t>(at.len, 1), std::move(msg)));
  }
  R err(const Expr& at, std::string msg) {
    error(at, std::move(msg));
    return {nullptr, T::Err};
  }
  R ok(const Expr& e, T t, std::vector<ExprPtr> args, int slot = -1) { return {with_type(e, to(t), std::move(args), slot), t}; }

  std::vector<std::string> name_candidates() const {
    std::vector<std::string> c;
    for (int i = 0; i < 8; ++i)
      if (scope_.role == ExprRole::Score || static_cast<Builtin>(i) != Builtin::Score)
        c.emplace_back(builtin_name(static_cast<Builtin>(i)));
    if (scope_.params)
      for (const auto& p : *scope_.params) c.push_back(p.name);
    c.emplace_back("causal");
    c.emplace_back("causal_br");
    c.emplace_back("true");
    c.emplace_back("false");
    return c;
  }
  int find_param(const std::string& n) const {
    if (scope_.params)
      for (size_t i = 0; i < scope_.params->size(); ++i)
        if ((*scope_.params)[i].name == n) return static_cast<int>(i);
    return -1;
  }
  int find_tensor(const std::string& n) const {
    if (scope_.tensors)
      for (size_t i = 0; i < scope_.tensors->size(); ++i)
        if ((*scope_.tensors)[i].name == n) return static_cast<int>(i);
    return -1;
  }
  std::string unknown_tensor_msg(const std::string& n) const {
    std::vector<std::string> c;
    if (scope_.tensors)
      for (const auto& t : *scope_.tensors) c.push_back(t.name);
    std::string hint = did_you_mean(n, c);
    if (!hint.empty()) return "unknown tensor '" + n + "'; did you mean '" + hint + "'?";
    return "unknown tensor '" + n + "'; declare it under 'tensors:' before using it";
  }

  std::vector<ExprPtr> check_args(const Expr& e, std::vector<T>& types, bool& bad) {
    std::vector<ExprPtr> out;
    for (const auto& a : e.args) {
      R r = check(*a);
      if (r.t == T::Err) bad = true;
      out.push_back(r.e);
      types.push_back(r.t);
    }
    return out;
  }

  R check(const Expr& e) {
    switch (e.kind) {
      case ExprKind::IntLit: return ok(e, T::I32, {});
      case ExprKind::FloatLit: return ok(e, T::F32, {});
      case ExprKind::BoolLit: return ok(e, T::Bool, {});
      case ExprKind::Var:
        if (e.var == Builtin::Score && scope_.role != ExprRole::Score)
          return err(e, "'score' is only available in the score expression, not in the mask");
        return ok(e, e.var == Builtin::Score ? T::F32 : T::I32, {});
      case ExprKind::Param: return check_param(e);
      case ExprKind::TensorRead: return check_tensor(e);
      case ExprKind::Unary: return check_unary(e);
      case ExprKind::Binary: return check_binary(e);
      case ExprKind::Select: return check_select(e, "?:");
      case ExprKind::Call: return check_call(e);
      case ExprKind::Shorthand: return check_shorthand(e);
    }
    return err(e, "internal: unknown expression kind");
  }

  R check_param(const Expr& e) {
    int slot = find_param(e.name);
    if (slot >= 0) return ok(e, from((*scope_.params)[slot].type), {}, slot);
    if (find_tensor(e.name) >= 0) return err(e, "'" + e.name + "' is a tensor; index it as " + e.name + "[...]");
    if (fn_from_name(e.name) || shorthand_from_name(e.name)) {
      std::string usage = e.name == "window" ? "window(left, right)" : e.name == "prefix" ? "prefix(n)"
                          : e.name == "document" ? "document(t)" : e.name + "(...)";
      return err(e, "'" + e.name + "' is not declared: call it as " + usage + ", or declare a param of that name under 'params:'");
    }
    std::string hint = did_you_mean(e.name, name_candidates());
    if (!hint.empty()) return err(e, "unknown name '" + e.name + "'; did you mean '" + hint + "'?");
    return err(e, "unknown name '" + e.name + "'; declare it under 'params:' (a runtime scalar) before using it");
  }

  R check_tensor(const Expr& e) {
    std::vector<T> types;
    bool bad = false;
    auto args = check_args(e, types, bad);
    int slot = find_tensor(e.name);
    if (slot < 0) {
      if (find_param(e.name) >= 0) return err(e, "'" + e.name + "' is a param, not a tensor; it cannot be indexed");
      return err(e, unknown_tensor_msg(e.name));
    }
    const TensorDecl& td = (*scope_.tensors)[slot];
    if (args.size() != td.dims.size()) {
      std::string dims;
      for (const auto& d : td.dims) dims += (dims.empty() ? "" : ", ") + extent_name(d);
      return err(e, "tensor '" + e.name + "' has " + std::to_string(td.dims.size()) + " dim" + (td.dims.size() == 1 ? "" : "s") +
                        " [" + dims + "] but is indexed with " + std::to_string(args.size()));
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (types[i] == T::Err) continue;
      const Expr& ix = *e.args[i];
      if (types[i] != T::I32) {
        error(ix, "index " + std::to_string(i) + " of '" + e.name + "' must be i32, but it is " + tname(types[i]) +
                      (types[i] == T::F32 ? "; use floor() and keep the index integral" : ""));
        bad = true;
        continue;
      }
      const Extent& d = td.dims[i];
      if (ix.kind == ExprKind::Var && d.kind != Extent::Kind::Fixed) {
        auto vk = var_extent(ix.var);
        // q and kv both walk sequence positions; self-attention documents index either.
        if (vk && *vk != d.kind && !(is_seq(*vk) && is_seq(d.kind))) {
          std::string msg = "index '" + std::string(builtin_name(ix.var)) + "' runs over " +
                            extent_names()[static_cast<size_t>(*vk)] + ", but dim " + std::to_string(i) + " of '" +
                            e.name + "' is " + extent_name(d);
          if (ix.var == Builtin::H && d.kind == Extent::Kind::HeadsKv) msg += "; use h_kv";
          if (ix.var == Builtin::HKv && d.kind == Extent::Kind::HeadsQ) msg += "; use h";
          error(ix, msg);
          bad = true;
        }
      }
      if (ix.kind == ExprKind::IntLit && d.kind == Extent::Kind::Fixed && (ix.int_value < 0 || ix.int_value >= d.size)) {
        error(ix, "index " + std::to_string(ix.int_value) + " is out of range for dim " + std::to_string(i) + " of '" +
                      e.name + "' (size " + std::to_string(d.size) + ")");
        bad = true;
      }
    }
    if (bad) return {nullptr, T::Err};
    return ok(e, from(td.elem), std::move(args), slot);
  }

  R check_unary(const Expr& e) {
    R a = check(*e.args[0]);
    if (a.t == T::Err) return a;
    if (e.un == UnOp::Neg) {
      if (!numeric(a.t)) return err(e, "unary '-' needs a number, but its operand is bool; use '!' to negate a condition");
      return ok(e, a.t, {a.e});
    }
    if (a.t != T::Bool) return err(e, "'!' needs a bool, but its operand is " + tname(a.t) + "; compare it first, e.g. x != 0");
    return ok(e, T::Bool, {a.e});
  }

  R check_binary(const Expr& e) {
    R a = check(*e.args[0]);
    R b = check(*e.args[1]);
    if (a.t == T::Err || b.t == T::Err) return {nullptr, T::Err};
    std::string op(binop_spelling(e.bin));
    if (is_arithmetic(e.bin)) {
      if (!numeric(a.t) || !numeric(b.t))
        return err(e, "'" + op + "' needs numbers, but its operands are " + tname(a.t) + " and " + tname(b.t) +
                          "; bool never converts to a number (use where(c, 1, 0))");
      return ok(e, promote(a.t, b.t), {a.e, b.e});
    }
    if (e.bin == BinOp::And || e.bin == BinOp::Or) {
      if (a.t != T::Bool || b.t != T::Bool)
        return err(e, "'" + op + "' needs bool operands, but they are " + tname(a.t) + " and " + tname(b.t) +
                          "; numbers never convert to bool (compare with != 0)");
      return ok(e, T::Bool, {a.e, b.e});
    }
    if (e.bin == BinOp::Eq || e.bin == BinOp::Ne) {
      if ((a.t == T::Bool) != (b.t == T::Bool))
        return err(e, "'" + op + "' compares " + tname(a.t) + " with " + tname(b.t) + "; bool never converts to a number");
      return ok(e, T::Bool, {a.e, b.e});
    }
    if (!numeric(a.t) || !numeric(b.t))
      return err(e, "'" + op + "' orders numbers, but its operands are " + tname(a.t) + " and " + tname(b.t) +
                        (a.t == T::Bool && e.args[0]->kind == ExprKind::Binary && is_comparison(e.args[0]->bin)
                             ? "; chained comparisons are not supported, write a < b && b < c"
                             : ""));
    return ok(e, T::Bool, {a.e, b.e});
  }

  R check_select(const Expr& e, const std::string& what) {
    R c = check(*e.args[0]);
    R a = check(*e.args[1]);
    R b = check(*e.args[2]);
    if (c.t == T::Err || a.t == T::Err || b.t == T::Err) return {nullptr, T::Err};
    if (c.t != T::Bool) return err(*e.args[0], "the condition of " + what + " must be bool, but it is " + tname(c.t));
    if ((a.t == T::Bool) != (b.t == T::Bool))
      return err(e, "the branches of " + what + " are " + tname(a.t) + " and " + tname(b.t) + "; they must both be numbers or both bool");
    return ok(e, a.t == T::Bool ? T::Bool : promote(a.t, b.t), {c.e, a.e, b.e});
  }

  R check_call(const Expr& e) {
    if (e.fn == Fn::Where) return check_select(e, "where(c, a, b)");
    std::vector<T> types;
    bool bad = false;
    auto args = check_args(e, types, bad);
    if (bad) return {nullptr, T::Err};
    std::string name(fn_name(e.fn));
    for (size_t i = 0; i < types.size(); ++i)
      if (!numeric(types[i])) return err(*e.args[i], "argument " + std::to_string(i + 1) + " of " + name + "() must be a number, but it is bool");
    switch (e.fn) {
      case Fn::Min: case Fn::Max: return ok(e, promote(types[0], types[1]), std::move(args));
      case Fn::Abs: return ok(e, types[0], std::move(args));
      default: return ok(e, T::F32, std::move(args));  // transcendental and floor are f32
    }
  }

  R check_shorthand(const Expr& e) {
    if (e.sh == Shorthand::Document) {
      int slot = find_tensor(e.name);
      if (slot < 0) {
        if (find_param(e.name) >= 0) return err(e, "document(" + e.name + ") needs an i32 tensor of document ids, but '" + e.name + "' is a param");
        return err(e, "document(" + e.name + "): " + unknown_tensor_msg(e.name));
      }
      const TensorDecl& td = (*scope_.tensors)[slot];
      bool batch_first = td.dims.size() == 2 && td.dims[0].kind == Extent::Kind::Batch;
      if (td.elem != Type::I32 || !(td.dims.size() == 1 || batch_first))
        return err(e, "document(" + e.name + ") needs an i32 tensor with dims [seq_kv] or [batch, seq_kv]");
      return ok(e, T::Bool, {}, slot);
    }
    std::vector<T> types;
    bool bad = false;
    auto args = check_args(e, types, bad);
    if (bad) return {nullptr, T::Err};
    for (size_t i = 0; i < types.size(); ++i)
      if (types[i] != T::I32)
        return err(*e.args[i], std::string(shorthand_name(e.sh)) + "() takes i32 arguments (positions), but argument " +
                                   std::to_string(i + 1) + " is " + tname(types[i]));
    return ok(e, T::Bool, std::move(args));
  }

  const Scope& scope_;
  const ExprOrigin& origin_;
  std::vector<Diagnostic>& diags_;
  bool failed_ = false;
};

}  // namespace

ExprPtr check_expr(const ExprPtr& parsed, const Scope& scope, const ExprOrigin& origin, std::vector<Diagnostic>& diags) {
  if (!parsed) return nullptr;
  return Checker(scope, origin, diags).run(parsed);
}

ExprPtr compile_expr(std::string_view text, const Scope& scope, const ExprOrigin& origin) {
  std::vector<Diagnostic> diags;
  ExprPtr e = check_expr(parse_expr(text, origin, diags), scope, origin, diags);
  if (!e) {
    if (diags.empty()) diags.push_back(origin.at(0, 1, "internal: expression rejected without a message"));
    throw SpecError(std::move(diags));
  }
  return e;
}

}  // namespace flashjit::dsl

#include "compiler/dsl/desugar.hpp"

namespace flashjit::dsl {

namespace {
ExprPtr typed(ExprPtr e, Type t) {
  auto c = std::const_pointer_cast<Expr>(e);  // freshly made here; no one else holds it
  c->type = t;
  c->typed = true;
  return e;
}
Type promote(Type a, Type b) { return a == Type::I32 && b == Type::I32 ? Type::I32 : Type::F32; }
}  // namespace

ExprPtr typed_int(int32_t v) { return typed(make_int(v), Type::I32); }
ExprPtr typed_float(float v) { return typed(make_float(v), Type::F32); }
ExprPtr typed_bool(bool v) { return typed(make_bool(v), Type::Bool); }
ExprPtr typed_var(Builtin v) { return typed(make_var(v), v == Builtin::Score ? Type::F32 : Type::I32); }
ExprPtr typed_binary(BinOp op, ExprPtr a, ExprPtr b) {
  Type t = is_arithmetic(op) ? promote(a->type, b->type) : Type::Bool;
  return typed(make_binary(op, std::move(a), std::move(b)), t);
}
ExprPtr typed_unary(UnOp op, ExprPtr a) {
  Type t = op == UnOp::Not ? Type::Bool : a->type;
  return typed(make_unary(op, std::move(a)), t);
}
ExprPtr typed_call(Fn fn, std::vector<ExprPtr> args) {
  Type t = Type::F32;
  if (fn == Fn::Min || fn == Fn::Max) t = promote(args[0]->type, args[1]->type);
  if (fn == Fn::Abs) t = args[0]->type;
  if (fn == Fn::Where) t = args[1]->type == Type::Bool ? Type::Bool : promote(args[1]->type, args[2]->type);
  return typed(make_call(fn, std::move(args)), t);
}
ExprPtr typed_select(ExprPtr c, ExprPtr a, ExprPtr b) {
  Type t = a->type == Type::Bool ? Type::Bool : promote(a->type, b->type);
  return typed(make_select(std::move(c), std::move(a), std::move(b)), t);
}

ExprPtr desugar(const ExprPtr& e, const std::vector<TensorDecl>* tensors) {
  if (e->kind == ExprKind::Shorthand) {
    auto q = typed_var(Builtin::Q);
    auto kv = typed_var(Builtin::Kv);
    switch (e->sh) {
      case Shorthand::Causal: return typed_binary(BinOp::Ge, q, kv);
      case Shorthand::CausalBr:
        return typed_binary(BinOp::Ge,
                            typed_binary(BinOp::Sub, typed_binary(BinOp::Add, q, typed_var(Builtin::SeqKv)), typed_var(Builtin::SeqQ)),
                            kv);
      case Shorthand::Window: {
        auto l = desugar(e->args[0], tensors);
        auto r = desugar(e->args[1], tensors);
        return typed_binary(BinOp::And, typed_binary(BinOp::Ge, kv, typed_binary(BinOp::Sub, q, l)),
                            typed_binary(BinOp::Le, kv, typed_binary(BinOp::Add, q, r)));
      }
      case Shorthand::Prefix: return typed_binary(BinOp::Lt, kv, desugar(e->args[0], tensors));
      case Shorthand::Document: {
        bool batched = tensors && e->slot >= 0 && static_cast<size_t>(e->slot) < tensors->size() &&
                       (*tensors)[e->slot].dims.size() == 2;
        auto read = [&](ExprPtr pos) {
          std::vector<ExprPtr> idx;
          if (batched) idx.push_back(typed_var(Builtin::B));
          idx.push_back(std::move(pos));
          auto t = std::const_pointer_cast<Expr>(make_tensor_read(e->name, std::move(idx)));
          t->slot = e->slot;
          return typed(t, Type::I32);
        };
        return typed_binary(BinOp::Eq, read(q), read(kv));
      }
    }
  }
  bool changed = false;
  std::vector<ExprPtr> args;
  args.reserve(e->args.size());
  for (const auto& a : e->args) {
    args.push_back(desugar(a, tensors));
    changed |= args.back() != a;
  }
  if (!changed) return e;
  return with_type(*e, e->type, std::move(args), e->slot);
}

}  // namespace flashjit::dsl

#include "compiler/dsl/transpose.hpp"

namespace flashjit::dsl {

namespace {

Builtin swapped(Builtin v) {
  switch (v) {
    case Builtin::Q: return Builtin::Kv;
    case Builtin::Kv: return Builtin::Q;
    case Builtin::SeqQ: return Builtin::SeqKv;
    case Builtin::SeqKv: return Builtin::SeqQ;
    default: return v;
  }
}

}  // namespace

ExprPtr transpose_mask(const ExprPtr& e) {
  if (e->kind == ExprKind::Var) {
    if (swapped(e->var) == e->var) return e;
    auto c = std::make_shared<Expr>(*e);
    c->var = swapped(e->var);
    return c;
  }
  std::vector<ExprPtr> args;
  args.reserve(e->args.size());
  bool changed = false;
  for (const ExprPtr& a : e->args) {
    args.push_back(transpose_mask(a));
    changed |= args.back() != a;
  }
  if (!changed) return e;
  return with_type(*e, e->type, std::move(args), e->slot);
}

}  // namespace flashjit::dsl

#include "compiler/dsl/affine.hpp"

#include "compiler/dsl/desugar.hpp"

namespace flashjit::dsl {

namespace {

bool add_checked(int64_t a, int64_t b, int64_t& out) { return !__builtin_add_overflow(a, b, &out); }
bool mul_checked(int64_t a, int64_t b, int64_t& out) { return !__builtin_mul_overflow(a, b, &out); }

std::optional<LinearForm> combine(const LinearForm& a, const LinearForm& b, int64_t sign) {
  LinearForm r = a;
  int64_t t;
  if (!mul_checked(b.c, sign, t) || !add_checked(r.c, t, r.c)) return std::nullopt;
  for (const auto& [s, k] : b.coeff) {
    int64_t kk;
    if (!mul_checked(k, sign, kk) || !add_checked(r.coeff[s], kk, r.coeff[s])) return std::nullopt;
    if (r.coeff[s] == 0) r.coeff.erase(s);
  }
  return r;
}

std::optional<LinearForm> scale(const LinearForm& a, int64_t k) {
  LinearForm r;
  if (k == 0) return r;
  if (!mul_checked(a.c, k, r.c)) return std::nullopt;
  for (const auto& [s, v] : a.coeff)
    if (!mul_checked(v, k, r.coeff[s])) return std::nullopt;
  return r;
}

std::optional<Sym> builtin_sym(Builtin v) {
  switch (v) {
    case Builtin::B: return Sym::B;
    case Builtin::H: return Sym::H;
    case Builtin::HKv: return Sym::HKv;
    case Builtin::Q: return Sym::Q;
    case Builtin::Kv: return Sym::Kv;
    case Builtin::SeqQ: return Sym::SeqQ;
    case Builtin::SeqKv: return Sym::SeqKv;
    default: return std::nullopt;
  }
}

Formula atom(LinearForm l, const ExprPtr& source) {
  Formula f;
  if (l.coeff.empty()) return Formula::constant(l.c >= 0);
  f.kind = Formula::Kind::Atom;
  f.atom = std::move(l);
  f.source = source;
  return f;
}

Formula unknown(const ExprPtr& source) {
  Formula f;
  f.kind = Formula::Kind::Unknown;
  f.source = source;
  return f;
}

Formula node(Formula::Kind k, std::vector<Formula> kids) {
  Formula f;
  f.kind = k;
  f.kids = std::move(kids);
  return f;
}

// The i32 value of an int64 computed exactly from i32 +, - and ×: those wrap modulo 2^32, so the
// wrapped result is the exact one modulo 2^32 (C++20 defines the narrowing as modular).
int64_t wrap_i32(int64_t x) { return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(x))); }

// lhs - rhs + bias >= 0, or Unknown when it cannot be formed.
Formula diff_atom(const LinearForm& lhs, const LinearForm& rhs, int64_t bias, const ExprPtr& source) {
  // Two constants: compare the i32 values the kernel computes, not the exact ones (the fuzzer
  // found `-21364836 < 48 - 21474836 * 565`: true in i32, where the product wraps, false in int64).
  if (lhs.coeff.empty() && rhs.coeff.empty()) return Formula::constant(wrap_i32(lhs.c) - wrap_i32(rhs.c) + bias >= 0);
  auto d = combine(lhs, rhs, -1);
  if (!d || !add_checked(d->c, bias, d->c)) return unknown(source);
  // The symbols cancel (q + c1 < q + c2): constant unless a side wraps at the q at hand. It
  // stays an atom (not folded) so the analyses that know the bounds check `source` for wrap
  // (classify's drop_wrapping, kv_range_may_overflow) before trusting the constant.
  if (d->coeff.empty()) {
    Formula f;
    f.kind = Formula::Kind::Atom;
    f.atom = std::move(*d);
    f.source = source;
    return f;
  }
  return atom(std::move(*d), source);
}

Formula nnf(const ExprPtr& e, bool neg) {
  using K = Formula::Kind;
  switch (e->kind) {
    case ExprKind::BoolLit: return Formula::constant(e->bool_value != neg);
    case ExprKind::Unary: return nnf(e->args[0], !neg);  // only ! is bool-typed
    case ExprKind::Binary: {
      BinOp op = e->bin;
      if (op == BinOp::And || op == BinOp::Or) {
        bool conj = (op == BinOp::And) != neg;  // De Morgan
        return node(conj ? K::And : K::Or, {nnf(e->args[0], neg), nnf(e->args[1], neg)});
      }
      const ExprPtr& a = e->args[0];
      const ExprPtr& b = e->args[1];
      if (a->type == Type::Bool) {
        // a == b  ≡  (a ∧ b) ∨ (¬a ∧ ¬b);  a != b  ≡  (a ∧ ¬b) ∨ (¬a ∧ b)
        bool eq = (op == BinOp::Eq) != neg;
        return node(K::Or, {node(K::And, {nnf(a, false), nnf(b, !eq)}), node(K::And, {nnf(a, true), nnf(b, eq)})});
      }
      if (a->type != Type::I32 || b->type != Type::I32) return unknown(e);
      auto la = linear_form(*a);
      auto lb = linear_form(*b);
      if (!la || !lb) return unknown(e);
      if (neg) {
        switch (op) {
          case BinOp::Lt: op = BinOp::Ge; break;
          case BinOp::Le: op = BinOp::Gt; break;
          case BinOp::Gt: op = BinOp::Le; break;
          case BinOp::Ge: op = BinOp::Lt; break;
          case BinOp::Eq: op = BinOp::Ne; break;
          default: op = BinOp::Eq; break;
        }
      }
      switch (op) {
        case BinOp::Lt: return diff_atom(*lb, *la, -1, e);  // b - a - 1 >= 0
        case BinOp::Le: return diff_atom(*lb, *la, 0, e);
        case BinOp::Gt: return diff_atom(*la, *lb, -1, e);
        case BinOp::Ge: return diff_atom(*la, *lb, 0, e);
        case BinOp::Eq: return node(K::And, {diff_atom(*la, *lb, 0, e), diff_atom(*lb, *la, 0, e)});
        default: return node(K::Or, {diff_atom(*la, *lb, -1, e), diff_atom(*lb, *la, -1, e)});
      }
    }
    case ExprKind::Select:
    case ExprKind::Call: {
      if (e->kind == ExprKind::Call && e->fn != Fn::Where) return unknown(e);
      // c ? x : y  ≡  (c ∧ x) ∨ (¬c ∧ y), negation goes to the branches.
      const ExprPtr& c = e->args[0];
      return node(K::Or, {node(K::And, {nnf(c, false), nnf(e->args[1], neg)}),
                          node(K::And, {nnf(c, true), nnf(e->args[2], neg)})});
    }
    default: return unknown(e);
  }
}

Formula simplify_impl(Formula f) {
  using K = Formula::Kind;
  if (f.kind != K::And && f.kind != K::Or) return f;
  const bool conj = f.kind == K::And;
  std::vector<Formula> kids;
  for (auto& k : f.kids) {
    Formula s = simplify_impl(std::move(k));
    if (s.kind == (conj ? K::True : K::False)) continue;          // neutral
    if (s.kind == (conj ? K::False : K::True)) return s;          // absorbing
    if (s.kind == f.kind) {                                       // flatten
      for (auto& g : s.kids) kids.push_back(std::move(g));
    } else {
      kids.push_back(std::move(s));
    }
  }
  if (kids.empty()) return Formula::constant(conj);
  if (kids.size() == 1) return std::move(kids[0]);
  return node(f.kind, std::move(kids));
}

}  // namespace

std::optional<LinearForm> difference(const LinearForm& a, const LinearForm& b) { return combine(a, b, -1); }

Formula fold_constants(Formula f) { return simplify_impl(std::move(f)); }

std::string LinearForm::to_string(const std::vector<Param>* params) const {
  static const char* names[] = {"b", "h", "h_kv", "q", "kv", "seq_q", "seq_kv"};
  std::string out;
  auto term = [&](int64_t k, const std::string& name) {
    if (out.empty()) {
      out += k == 1 ? "" : k == -1 ? "-" : std::to_string(k) + " * ";
    } else {
      out += k < 0 ? " - " : " + ";
      int64_t a = k < 0 ? -k : k;
      if (a != 1) out += std::to_string(a) + " * ";
    }
    out += name;
  };
  for (const auto& [s, k] : coeff) {
    int32_t i = static_cast<int32_t>(s);
    std::string name;
    if (i < static_cast<int32_t>(Sym::Param0)) {
      name = names[i];
    } else {
      size_t slot = static_cast<size_t>(i - static_cast<int32_t>(Sym::Param0));
      name = params && slot < params->size() ? (*params)[slot].name : "param#" + std::to_string(slot);
    }
    term(k, name);
  }
  if (out.empty()) return std::to_string(c);
  if (c > 0) out += " + " + std::to_string(c);
  if (c < 0) out += " - " + std::to_string(-c);
  return out;
}

std::optional<LinearForm> linear_form(const Expr& e) {
  if (e.type != Type::I32) return std::nullopt;
  switch (e.kind) {
    case ExprKind::IntLit: { LinearForm l; l.c = e.int_value; return l; }
    case ExprKind::Var: {
      auto s = builtin_sym(e.var);
      if (!s) return std::nullopt;
      LinearForm l;
      l.coeff[*s] = 1;
      return l;
    }
    case ExprKind::Param: {
      if (e.slot < 0) return std::nullopt;
      LinearForm l;
      l.coeff[param_sym(e.slot)] = 1;
      return l;
    }
    case ExprKind::Unary: {
      auto a = linear_form(*e.args[0]);
      return a ? scale(*a, -1) : std::nullopt;
    }
    case ExprKind::Binary: {
      auto a = linear_form(*e.args[0]);
      if (!a) return std::nullopt;
      auto b = linear_form(*e.args[1]);
      if (!b) return std::nullopt;
      if (e.bin == BinOp::Add) return combine(*a, *b, 1);
      if (e.bin == BinOp::Sub) return combine(*a, *b, -1);
      if (e.bin == BinOp::Mul) {
        if (a->coeff.empty()) return scale(*b, a->c);
        if (b->coeff.empty()) return scale(*a, b->c);
      }
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

Formula mask_formula(const ExprPtr& mask, const std::vector<TensorDecl>* tensors) {
  return simplify_impl(nnf(desugar(mask, tensors), false));
}

Formula approximate(const Formula& f, bool value) {
  if (f.kind == Formula::Kind::Unknown) return Formula::constant(value);
  if (f.kind != Formula::Kind::And && f.kind != Formula::Kind::Or) return f;
  Formula r = node(f.kind, {});
  for (const auto& k : f.kids) r.kids.push_back(approximate(k, value));
  return simplify_impl(std::move(r));
}

bool has_unknown(const Formula& f) {
  if (f.kind == Formula::Kind::Unknown) return true;
  for (const auto& k : f.kids)
    if (has_unknown(k)) return true;
  return false;
}

void collect_atom_sources(const Formula& f, std::vector<ExprPtr>& out) {
  if ((f.kind == Formula::Kind::Atom || f.kind == Formula::Kind::Unknown) && f.source) {
    for (const auto& s : out)
      if (s == f.source) return;
    out.push_back(f.source);
  }
  for (const auto& k : f.kids) collect_atom_sources(k, out);
}

std::optional<std::vector<std::vector<LinearForm>>> to_dnf(const Formula& f, size_t max_terms) {
  using K = Formula::Kind;
  using Dnf = std::vector<std::vector<LinearForm>>;
  switch (f.kind) {
    case K::True: return Dnf{{}};
    case K::False: return Dnf{};
    case K::Atom: return Dnf{{f.atom}};
    case K::Unknown: return std::nullopt;
    case K::Or: {
      Dnf out;
      for (const auto& k : f.kids) {
        auto d = to_dnf(k, max_terms);
        if (!d) return std::nullopt;
        for (auto& c : *d) out.push_back(std::move(c));
        if (out.size() > max_terms) return std::nullopt;
      }
      return out;
    }
    case K::And: {
      Dnf out{{}};
      for (const auto& k : f.kids) {
        auto d = to_dnf(k, max_terms);
        if (!d) return std::nullopt;
        Dnf next;
        for (const auto& a : out)
          for (const auto& b : *d) {
            auto c = a;
            c.insert(c.end(), b.begin(), b.end());
            next.push_back(std::move(c));
            if (next.size() > max_terms) return std::nullopt;
          }
        out = std::move(next);
      }
      return out;
    }
  }
  return std::nullopt;
}

}  // namespace flashjit::dsl

namespace flashjit::dsl {

std::optional<int64_t> SymbolValues::get(Sym s) const {
  switch (s) {
    case Sym::B: return b;
    case Sym::H: return h;
    case Sym::HKv: return h_kv;
    case Sym::SeqQ: return seq_q;
    case Sym::SeqKv: return seq_kv;
    case Sym::Q: case Sym::Kv: return std::nullopt;
    default: {
      size_t slot = static_cast<size_t>(static_cast<int32_t>(s) - static_cast<int32_t>(Sym::Param0));
      if (slot < params.size() && params[slot] && params[slot]->type == Type::I32) return params[slot]->i;
      return std::nullopt;
    }
  }
}

Formula substitute(const Formula& f, const SymbolValues& values) {
  using K = Formula::Kind;
  if (f.kind == K::Atom) {
    LinearForm l;
    l.c = f.atom.c;
    for (const auto& [s, k] : f.atom.coeff) {
      if (s == Sym::Q || s == Sym::Kv) { l.coeff[s] = k; continue; }
      auto v = values.get(s);
      int64_t t;
      if (!v || __builtin_mul_overflow(k, *v, &t) || __builtin_add_overflow(l.c, t, &l.c)) {
        Formula u;
        u.kind = K::Unknown;
        u.source = f.source;
        return u;
      }
    }
    if (l.coeff.empty()) return Formula::constant(l.c >= 0);
    Formula a = f;
    a.atom = std::move(l);
    return a;
  }
  if (f.kind != K::And && f.kind != K::Or) return f;
  Formula r;
  r.kind = f.kind;
  for (const auto& k : f.kids) r.kids.push_back(substitute(k, values));
  return fold_constants(std::move(r));
}

QKvAtom qkv_atom(const LinearForm& l) {
  return {l.coeff_of(Sym::Q), l.coeff_of(Sym::Kv), l.c};
}

}  // namespace flashjit::dsl

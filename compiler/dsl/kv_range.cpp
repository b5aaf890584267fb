#include "compiler/dsl/kv_range.hpp"

#include <algorithm>

#include "compiler/dsl/desugar.hpp"
#include "compiler/dsl/interval.hpp"
#include "compiler/dsl/transpose.hpp"

namespace flashjit::dsl {

namespace {

// Splits one conjunction of atoms into a band; nullopt if some atom's kv coefficient is
// not ±1 (kv >= (stuff)/2 would need a division the kernel bound does not model).
std::optional<KvBand> band_of(const std::vector<LinearForm>& conj) {
  KvBand band;
  for (const auto& atom : conj) {  // atom >= 0
    int64_t k = atom.coeff_of(Sym::Kv);
    LinearForm rest = atom;
    rest.coeff.erase(Sym::Kv);
    if (k == 0) {
      band.guards.push_back(std::move(rest));
    } else if (k == 1) {  // kv + rest >= 0  →  kv >= -rest
      std::optional<LinearForm> l = difference(LinearForm{}, rest);
      if (!l) return std::nullopt;  // -rest overflows int64
      band.lower.push_back(std::move(*l));
    } else if (k == -1) {  // -kv + rest >= 0  →  kv <= rest
      band.upper.push_back(std::move(rest));
    } else {
      return std::nullopt;
    }
  }
  return band;
}

// Replaces atoms with a kv coefficient other than 0/±1 by Unknown (then approximated).
Formula unknown_non_unit(const Formula& f) {
  if (f.kind == Formula::Kind::Atom) {
    int64_t k = f.atom.coeff_of(Sym::Kv);
    if (k == 0 || k == 1 || k == -1) return f;
    Formula u;
    u.kind = Formula::Kind::Unknown;
    u.source = f.source;
    return u;
  }
  if (f.kind != Formula::Kind::And && f.kind != Formula::Kind::Or) return f;
  Formula r;
  r.kind = f.kind;
  for (const auto& k : f.kids) r.kids.push_back(unknown_non_unit(k));
  return r;
}

std::vector<KvBand> bands(const Formula& f, bool over) {
  auto dnf = to_dnf(f);
  if (!dnf) return over ? std::vector<KvBand>{KvBand{}} : std::vector<KvBand>{};
  std::vector<KvBand> out;
  for (const auto& conj : *dnf) {
    auto b = band_of(conj);
    if (!b) return over ? std::vector<KvBand>{KvBand{}} : std::vector<KvBand>{};
    out.push_back(std::move(*b));
  }
  return out;
}

// Value of a form at q, with the other symbols from `values`; nullopt if one is unknown.
std::optional<__int128> at(const LinearForm& l, int64_t q, const SymbolValues& values) {
  __int128 v = l.c;
  for (const auto& [s, k] : l.coeff) {
    if (s == Sym::Q) { v += static_cast<__int128>(k) * q; continue; }
    auto x = values.get(s);
    if (!x) return std::nullopt;
    v += static_cast<__int128>(k) * *x;
  }
  return v;
}

struct Span {
  __int128 lo, hi;  // inclusive; lo > hi is empty
};

constexpr __int128 kNegInf = -(static_cast<__int128>(1) << 100);
constexpr __int128 kPosInf = static_cast<__int128>(1) << 100;

// A form as a*q + c with every other symbol substituted; nullopt if one is unknown.
std::optional<std::pair<__int128, __int128>> in_q(const LinearForm& l, const SymbolValues& values) {
  auto c = at(l, 0, values);
  if (!c) return std::nullopt;
  return std::make_pair(static_cast<__int128>(l.coeff_of(Sym::Q)), *c);
}

__int128 floor_div(__int128 a, __int128 b) {  // b > 0
  __int128 q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// Linear in q, so over a range of rows the extremes of each form are at its two ends.
// Outer (visit) bounds: first narrow the rows to those where the band can be non-empty
// (every guard, every lower <= every upper, keys inside [0, seq_kv)), then take each
// form's most permissive end there. Inner (full) bounds take the strictest end over all
// rows of the tile; a row where the band is empty makes them cross, i.e. empty.
Span band_span(const KvBand& b, int64_t q0, int64_t q1, const SymbolValues& values, bool outer) {
  __int128 qa = q0, qb = q1 - 1;
  if (outer) {
    std::vector<LinearForm> constraints = b.guards;  // each >= 0
    LinearForm last_key;
    last_key.c = values.seq_kv.value_or(0) - 1;
    // (seq_kv - 1) - l >= 0 and u - l >= 0; a difference that overflows int64 is left out, which
    // only widens the rows (sound for the visit bounds).
    auto require = [&](const LinearForm& a, const LinearForm& l) {
      if (std::optional<LinearForm> d = difference(a, l)) constraints.push_back(std::move(*d));
    };
    for (const auto& l : b.lower) {
      require(last_key, l);
      for (const auto& u : b.upper) require(u, l);
    }
    for (const auto& u : b.upper) constraints.push_back(u);  // u >= 0
    for (const auto& c : constraints) {
      auto f = in_q(c, values);
      if (!f) continue;  // unknown: may hold
      auto [a, k] = *f;  // a*q + k >= 0
      if (a == 0) {
        if (k < 0) return {1, 0};
      } else if (a > 0) {
        qa = std::max(qa, -floor_div(k, a));  // q >= ceil(-k / a)
      } else {
        qb = std::min(qb, floor_div(k, -a));
      }
    }
    if (qa > qb) return {1, 0};
  } else {
    for (const auto& g : b.guards) {
      auto x = at(g, q0, values), y = at(g, q1 - 1, values);
      if (!x || !y || std::min(*x, *y) < 0) return {1, 0};
    }
  }
  Span s{kNegInf, kPosInf};
  for (const auto& l : b.lower) {
    auto f = in_q(l, values);
    if (!f) {
      if (outer) continue;
      return {1, 0};
    }
    __int128 x = f->first * qa + f->second, y = f->first * qb + f->second;
    s.lo = std::max(s.lo, outer ? std::min(x, y) : std::max(x, y));
  }
  for (const auto& u : b.upper) {
    auto f = in_q(u, values);
    if (!f) {
      if (outer) continue;
      return {1, 0};
    }
    __int128 x = f->first * qa + f->second, y = f->first * qb + f->second;
    s.hi = std::min(s.hi, outer ? std::max(x, y) : std::min(x, y));
  }
  return s;
}

}  // namespace

KvRange derive_kv_range(const ExprPtr& mask, const std::vector<TensorDecl>* tensors) {
  KvRange r;
  Formula f = unknown_non_unit(mask_formula(mask, tensors));
  r.exact = !has_unknown(f);
  collect_atom_sources(f, r.atoms);
  // Keep only the affine comparisons in `atoms`: the Unknown ones never enter a bound.
  std::vector<ExprPtr> linear;
  for (const auto& a : r.atoms) {
    Formula probe = mask_formula(a, tensors);
    if (!has_unknown(unknown_non_unit(probe))) linear.push_back(a);
  }
  r.atoms = std::move(linear);
  r.visit = bands(fold_constants(approximate(f, true)), true);
  r.full = bands(fold_constants(approximate(f, false)), false);
  return r;
}

KvRange derive_q_range(const ExprPtr& mask, const std::vector<TensorDecl>* tensors) {
  return derive_kv_range(transpose_mask(desugar(mask, tensors)), tensors);
}

SymbolValues swapped_sizes(const SymbolValues& values) {
  SymbolValues v = values;
  std::swap(v.seq_q, v.seq_kv);
  return v;
}

TileKvRange eval_q_range(const KvRange& q_range, int64_t kv0, int64_t kv1, const SymbolValues& values) {
  return eval_kv_range(q_range, kv0, kv1, swapped_sizes(values));
}

TileKvRange eval_kv_range(const KvRange& r, int64_t q0, int64_t q1, const SymbolValues& values) {
  TileKvRange t;
  const int64_t seq_kv = values.seq_kv.value_or(0);
  if (q0 >= q1 || seq_kv <= 0) return t;
  if (kv_range_may_overflow(r, values)) {
    t.visit_hi = seq_kv;
    return t;
  }
  __int128 vlo = kPosInf, vhi = kNegInf;
  for (const auto& b : r.visit) {
    Span s = band_span(b, q0, q1, values, true);
    s.lo = std::max<__int128>(s.lo, 0);
    s.hi = std::min<__int128>(s.hi, seq_kv - 1);
    if (s.lo > s.hi) continue;
    vlo = std::min(vlo, s.lo);
    vhi = std::max(vhi, s.hi);
  }
  if (vlo > vhi) return t;  // the whole tile is masked: visit nothing
  t.visit_lo = static_cast<int64_t>(vlo);
  t.visit_hi = static_cast<int64_t>(vhi + 1);
  // Full bands may overlap or touch; their merged union is all visible, the largest piece wins.
  std::vector<Span> pieces;
  for (const auto& b : r.full) {
    Span s = band_span(b, q0, q1, values, false);
    s.lo = std::max<__int128>(s.lo, t.visit_lo);
    s.hi = std::min<__int128>(s.hi, t.visit_hi - 1);
    if (s.lo <= s.hi) pieces.push_back(s);
  }
  std::sort(pieces.begin(), pieces.end(), [](const Span& a, const Span& b) { return a.lo < b.lo; });
  std::vector<Span> merged;
  for (const auto& p : pieces) {
    if (!merged.empty() && p.lo <= merged.back().hi + 1) merged.back().hi = std::max(merged.back().hi, p.hi);
    else merged.push_back(p);
  }
  __int128 best = 0;
  for (const auto& m : merged) {
    if (m.hi - m.lo + 1 > best) {
      best = m.hi - m.lo + 1;
      t.full_lo = static_cast<int64_t>(m.lo);
      t.full_hi = static_cast<int64_t>(m.hi + 1);
    }
  }
  if (best == 0) t.full_lo = t.full_hi = t.visit_lo;
  return t;
}

bool kv_range_may_overflow(const KvRange& r, const SymbolValues& values, const std::vector<TensorDecl>* tensors) {
  Bounds bd;
  bd.tensors = tensors;
  if (values.seq_q) { bd.seq_q = IRange::point(*values.seq_q); bd.q = {0, std::max<int64_t>(*values.seq_q - 1, 0)}; }
  if (values.seq_kv) { bd.seq_kv = IRange::point(*values.seq_kv); bd.kv = {0, std::max<int64_t>(*values.seq_kv - 1, 0)}; }
  if (values.b) bd.b = IRange::point(*values.b);
  if (values.h) bd.h = IRange::point(*values.h);
  if (values.h_kv) bd.h_kv = IRange::point(*values.h_kv);
  bd.params = values.params;
  for (const auto& a : r.atoms)
    if (analyze(*a, bd).may_wrap) return true;
  return false;
}

namespace {

// A transposed range's form in the mask's own names: q and kv, seq_q and seq_kv exchanged back.
LinearForm untransposed(const LinearForm& f) {
  auto back = [](Sym s) {
    switch (s) {
      case Sym::Q: return Sym::Kv;
      case Sym::Kv: return Sym::Q;
      case Sym::SeqQ: return Sym::SeqKv;
      case Sym::SeqKv: return Sym::SeqQ;
      default: return s;
    }
  };
  LinearForm out;
  out.c = f.c;
  for (const auto& [s, k] : f.coeff) out.coeff[back(s)] = k;
  return out;
}

std::string band_text(const KvBand& b, const std::vector<Param>* params, bool transposed) {
  auto text = [&](const LinearForm& f) { return (transposed ? untransposed(f) : f).to_string(params); };
  auto list = [&](const std::vector<LinearForm>& v, const char* fn, const char* none) {
    if (v.empty()) return std::string(none);
    if (v.size() == 1) return text(v[0]);
    std::string s = std::string(fn) + "(";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + text(v[i]);
    return s + ")";
  };
  std::string s = std::string(transposed ? "q" : "kv") + " in [" + list(b.lower, "max", "0") + ", " +
                  list(b.upper, "min", transposed ? "seq_q - 1" : "seq_kv - 1") + "]";
  for (const auto& g : b.guards) s += " if " + text(g) + " >= 0";
  return s;
}

std::string describe_range(const KvRange& r, const std::vector<Param>* params, bool transposed) {
  auto many = [&](const std::vector<KvBand>& bs) {
    if (bs.empty()) return std::string("none");
    std::string s;
    for (size_t i = 0; i < bs.size(); ++i) s += (i ? " or " : "") + band_text(bs[i], params, transposed);
    return s;
  };
  return std::string(r.exact ? "exact" : "bounds") + "; visit: " + many(r.visit) + "; full: " + many(r.full);
}

}  // namespace

std::string describe_kv_range(const KvRange& r, const std::vector<Param>* params) {
  return describe_range(r, params, false);
}

std::string describe_q_range(const KvRange& q_range, const std::vector<Param>* params) {
  return describe_range(q_range, params, true);
}

}  // namespace flashjit::dsl

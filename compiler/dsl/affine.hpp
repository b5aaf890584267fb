// Masks as boolean formulas over linear integer atoms: the shape tile analysis reasons about.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/dsl/ast.hpp"
#include "compiler/dsl/decl.hpp"

namespace flashjit::dsl {

// Symbols a linear form may mention: the builtins (score excluded) and i32 params by slot.
enum class Sym : int32_t { B = 0, H, HKv, Q, Kv, SeqQ, SeqKv, Param0 };
inline Sym param_sym(int slot) { return static_cast<Sym>(static_cast<int32_t>(Sym::Param0) + slot); }

// c + sum(coeff[s] * s), exact over the integers (int64, checked for overflow).
struct LinearForm {
  int64_t c = 0;
  std::map<Sym, int64_t> coeff;  // no zero entries

  int64_t coeff_of(Sym s) const { auto it = coeff.find(s); return it == coeff.end() ? 0 : it->second; }
  bool mentions(Sym s) const { return coeff.count(s) != 0; }
  // "q - window + 1"; names params by `params` (or "param#i" when null).
  std::string to_string(const std::vector<Param>* params = nullptr) const;
};

// Formula in negation normal form: negations are folded into the atoms (¬(L ≥ 0) is
// -L - 1 ≥ 0 over the integers). Unknown stands for a literal the analysis cannot read as
// linear (tensor reads, f32, products of variables...): it may be true or false anywhere.
struct Formula {
  enum class Kind : uint8_t { True, False, Atom, Unknown, And, Or };
  Kind kind = Kind::True;
  LinearForm atom;   // Atom: atom >= 0
  ExprPtr source;    // Atom/Unknown: the comparison it came from (launch overflow checks)
  std::vector<Formula> kids;

  static Formula constant(bool v) { Formula f; f.kind = v ? Kind::True : Kind::False; return f; }
};

// a − b, or nullopt where a coefficient or the constant overflows int64.
std::optional<LinearForm> difference(const LinearForm& a, const LinearForm& b);

// The linear form of an i32 expression, or nullopt (non-linear, f32, tensor read, /, %...).
std::optional<LinearForm> linear_form(const Expr& e);

// NNF of a checked bool expression (shorthands are expanded first).
Formula mask_formula(const ExprPtr& mask, const std::vector<TensorDecl>* tensors);

// Replaces every Unknown literal by `value` and folds constants: with true, the result is
// implied by the mask (over-approximation); with false, it implies the mask.
Formula approximate(const Formula& f, bool value);

// Drops neutral True/False children, returns absorbing ones, flattens nested And/Or.
Formula fold_constants(Formula f);
bool has_unknown(const Formula& f);
void collect_atom_sources(const Formula& f, std::vector<ExprPtr>& out);  // Atom and Unknown

// Disjunctive normal form: a list of conjunctions of atoms (True/False folded away: an empty
// list is false; a list holding an empty conjunction is true). nullopt when it would exceed
// max_terms conjunctions. Must be given a formula without Unknown.
std::optional<std::vector<std::vector<LinearForm>>> to_dnf(const Formula& f, size_t max_terms = 64);

}  // namespace flashjit::dsl

namespace flashjit::dsl {

// Launch-time values of the symbols other than q and kv (nullopt = not known).
struct SymbolValues {
  std::optional<int64_t> b, h, h_kv, seq_q, seq_kv;
  std::vector<std::optional<Value>> params;  // by slot
  std::optional<int64_t> get(Sym s) const;
};

// Folds known symbols into the constants. An atom left mentioning anything but q and kv
// becomes Unknown, so the result talks about (q, kv) only.
Formula substitute(const Formula& f, const SymbolValues& values);

// a*q + b*kv + c with int64 coefficients: an atom after substitute().
struct QKvAtom {
  int64_t a_q = 0, a_kv = 0, c = 0;
};
QKvAtom qkv_atom(const LinearForm& l);

}  // namespace flashjit::dsl

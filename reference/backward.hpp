// The fp64 attention backward over inputs given as doubles (private): attention_backward_fp64 runs
// it on a problem's dtype values; a finite-difference test runs it on perturbed ones.
#pragma once

#include <cstdint>
#include <vector>

#include "flashjit/reference.hpp"
#include "reference/semantics.hpp"

namespace flashjit::ref::detail {

// q, k, v (BSHD, as in Problem) and the upstream gradient dO [batch, seq_q, heads_q, d_v], as T.
template <class T>
struct Inputs {
  std::vector<T> q, k, v, d_o;
};

// p.q, p.k, p.v and d_o (dtype bits) widened to T (exactly: fp16 and bf16 values are floats);
// throws Error(usage) when a size does not match p's shape.
template <class T>
Inputs<T> widen(const Problem& p, const std::vector<uint16_t>& d_o);

// The pointwise part of attention at (b, h, q, kv): whether the key is visible, the score
// modifier f(x) of the scaled score x = scale·q·k, and f'(x). By default the spec's,
// through the DSL interpreter; virtual so that a test can put closed forms evaluated in double in
// their place (the language's f32 would drown a finite difference in rounding).
class Pointwise {
 public:
  explicit Pointwise(const Problem& p) : sem_(p) {}
  virtual ~Pointwise() = default;
  virtual bool visible(int64_t b, int64_t h, int64_t q, int64_t kv) const { return sem_.visible(b, h, q, kv); }
  // The score modifier is f32 in the language; the identity keeps full precision, as in attention_fp64.
  virtual double score(int64_t b, int64_t h, int64_t q, int64_t kv, double x) const {
    return sem_.identity_score() ? x : double(sem_.score(b, h, q, kv, float(x)));
  }
  virtual double grad(int64_t b, int64_t h, int64_t q, int64_t kv, double x) const {
    return sem_.identity_score() ? 1.0 : double(sem_.score_grad(b, h, q, kv, float(x)));
  }

 private:
  Semantics sem_;
};

// fp64 attention of every row over `in` (p gives the shape, spec, scale, params and tensors; its
// own q, k, v are not read): O [batch, seq_q, heads_q, d_v], 0 for fully masked rows.
std::vector<double> forward_fp64(const Problem& p, const Inputs<double>& in, const Pointwise& f);

// The fp64 gradients of Σ O∘dO with respect to in.q, in.k and in.v, as attention_backward_fp64.
Grads backward_fp64(const Problem& p, const Inputs<double>& in, const Pointwise& f);

}  // namespace flashjit::ref::detail

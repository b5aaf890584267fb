// CPU reference attention backward: fp64 "truth" and the same-dtype straightforward implementation
// whose error sets the bar for a kernel's dq, dk, dv (the forward's rule, reference/attention.cpp).
//
// Both run one algorithm: FlashAttention-2's backward (Dao 2023, Algorithm 2) without tiling. With
// f the spec's score modifier, s = q·k and x = f(scale·s) the modified score of a visible pair, and
// the row's softmax statistics m = max x, l = Σ exp(x − m),
//   P = exp(x − m) / l,  dP = dO·vᵀ,  D = Σⱼ P∘dP,  dS = P∘(dP − D)∘f'(scale·s)·scale,
//   dQ = dS·K,  dK = dSᵀ·Q,  dV = Pᵀ·dO,
// where f' is the front end's symbolic derivative (dsl::Spec::score_grad), 1 for the identity.
// D = Σⱼ P∘dP equals Algorithm 2's rowsum(dO∘O) because O = P·V (FlashAttention, Dao et al. 2022,
// Appendix B.2), and needs no O. dQ rows are summed over keys in a pass over query rows; dK and dV
// rows over queries in a second pass over keys that recomputes P and dS from the saved statistics,
// so no thread writes another's rows and no seq_q × seq_kv matrix is stored.
#include <cmath>
#include <limits>
#include <sstream>
#include <type_traits>

#include "flashjit/reference.hpp"
#include "reference/backward.hpp"

namespace flashjit::ref {

namespace detail {

template <class T>
Inputs<T> widen(const Problem& p, const std::vector<uint16_t>& d_o) {
  auto wide = [&](const std::vector<uint16_t>& bits, int64_t rows, int64_t width, const char* name) {
    if (int64_t(bits.size()) != p.batch * rows * width)
      throw Error(ErrorKind::usage, std::string("reference backward: ") + name + " has " + std::to_string(bits.size()) +
                                        " elements, the shape needs " + std::to_string(p.batch * rows * width));
    std::vector<T> out(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) out[i] = T(from_half_bits(bits[i], p.dtype()));
    return out;
  };
  return {wide(p.q, p.seq_q * p.heads_q, p.d_qk(), "q"), wide(p.k, p.seq_kv * p.heads_kv, p.d_qk(), "k"),
          wide(p.v, p.seq_kv * p.heads_kv, p.d_v(), "v"), wide(d_o, p.seq_q * p.heads_q, p.d_v(), "d_o")};
}
template Inputs<double> widen(const Problem&, const std::vector<uint16_t>&);
template Inputs<float> widen(const Problem&, const std::vector<uint16_t>&);

namespace {

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// Σ a[i]·b[i] with four partial sums: the reference's hot loop, which no compiler vectorises
// without reassociation.
template <class T>
T dot(const T* a, const T* b, int64_t n) {
  T s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) s[j] += a[i + j] * b[i + j];
  for (; i < n; ++i) s[0] += a[i] * b[i];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

template <class T>
void axpy(std::vector<T>& acc, T w, const T* x) {
  for (size_t c = 0; c < acc.size(); ++c) acc[c] += w * x[c];
}

// The backward of one problem in T: double is the fp64 truth and rounds nothing; float is the
// same-dtype implementation, whose fp32 sums are rounded to dtype wherever a plain implementation
// materialises a dtype tensor (attention_backward_same_dtype in reference.hpp lists where).
template <class T>
class Backward {
 public:
  Backward(const Problem& p, const Inputs<T>& in, const Pointwise& f)
      : p_(p), in_(in), f_(f), dt_(p.dtype()), scale_(T(p.effective_scale())), group_(p.heads_q / p.heads_kv),
        rows_(size_t(p.batch * p.heads_q * p.seq_q)) {}

  Grads run() {
    Grads g;
    g.dq.assign(in_.q.size(), 0.0);
    g.dk.assign(in_.k.size(), 0.0);
    g.dv.assign(in_.v.size(), 0.0);
    parallel_for(rows_.size(), [&](size_t r) { query_row(r, g.dq); });
    parallel_for(size_t(p_.batch * p_.heads_kv * p_.seq_kv), [&](size_t c) { key_row(c, g.dk, g.dv); });
    return g;
  }

  // O of every row, over the statistics the backward uses (the finite-difference test's forward).
  std::vector<double> forward() {
    std::vector<double> o(in_.d_o.size(), 0.0);
    parallel_for(rows_.size(), [&](size_t r) {
      const At a = row_at(r, 0);
      std::vector<T> pre, x;
      const Stats st = softmax_stats(a, pre, x);
      if (st.m == kNegInf<T>) return;
      std::vector<T> acc(p_.d_v(), T(0));
      for (int64_t kv = 0; kv < p_.seq_kv; ++kv)
        if (x[kv] != kNegInf<T>) axpy(acc, prob(st, x[kv]), &in_.v[v_index(p_, a.b, kv, a.hk)]);
      for (int64_t c = 0; c < p_.d_v(); ++c) o[o_index(p_, a.b, a.q, a.h) + c] = double(rnd(acc[c]));
    });
    return o;
  }

 private:
  static constexpr bool kExact = std::is_same_v<T, double>;
  struct At {
    int64_t b, h, hk, q, kv;
  };
  // A query row's softmax: m = max x (−inf when no key is visible), l = Σ exp(x − m), D = Σ P∘dP.
  struct Stats {
    T m = kNegInf<T>, l = 0, d = 0;
  };

  T rnd(T x) const {
    if constexpr (kExact) return x;
    else return round_to(x, dt_);
  }
  At row_at(size_t r, int64_t kv) const {
    const int64_t q = int64_t(r) % p_.seq_q, bh = int64_t(r) / p_.seq_q, h = bh % p_.heads_q;
    return {bh / p_.heads_q, h, h / group_, q, kv};
  }
  const T* q_of(const At& a) const { return &in_.q[q_index(p_, a.b, a.q, a.h)]; }
  const T* k_of(const At& a) const { return &in_.k[k_index(p_, a.b, a.kv, a.hk)]; }
  const T* do_of(const At& a) const { return &in_.d_o[o_index(p_, a.b, a.q, a.h)]; }
  const T* v_of(const At& a) const { return &in_.v[v_index(p_, a.b, a.kv, a.hk)]; }

  // scale·q·k as the score modifier sees it (S = QKᵀ rounded, then scaled and rounded).
  T scaled(const At& a) const { return rnd(rnd(dot(q_of(a), k_of(a), p_.d_qk())) * scale_); }
  // The modified score of a visible pair.
  T modified(const At& a, T pre) const { return rnd(T(f_.score(a.b, a.h, a.q, a.kv, double(pre)))); }
  T prob(const Stats& st, T x) const { return rnd(std::exp(x - st.m) / st.l); }
  T d_prob(const At& a) const { return rnd(dot(do_of(a), v_of(a), p_.d_v())); }
  // dL/d(q·k) of a pair: the softmax backward, then the score modifier's and the scale's chain rule.
  T d_score(const At& a, const Stats& st, T p, T dp, T pre) const {
    const T d_modified = rnd(p * (dp - st.d));
    const T d_pre = rnd(d_modified * T(f_.grad(a.b, a.h, a.q, a.kv, double(pre))));
    return rnd(d_pre * scale_);
  }

  // The row's pre-modifier scores and modified scores (−inf where masked) and its m and l.
  Stats softmax_stats(At a, std::vector<T>& pre, std::vector<T>& x) const {
    Stats st;
    pre.assign(p_.seq_kv, T(0));
    x.assign(p_.seq_kv, kNegInf<T>);
    for (a.kv = 0; a.kv < p_.seq_kv; ++a.kv) {
      if (!f_.visible(a.b, a.h, a.q, a.kv)) continue;
      pre[a.kv] = scaled(a);
      x[a.kv] = modified(a, pre[a.kv]);
      st.m = std::max(st.m, x[a.kv]);
    }
    if (st.m == kNegInf<T>) return st;
    for (T xi : x)
      if (xi != kNegInf<T>) st.l += std::exp(xi - st.m);
    return st;
  }

  // Pass 1, one query row: its statistics (kept for pass 2) and its dq row.
  void query_row(size_t r, std::vector<double>& dq) {
    At a = row_at(r, 0);
    std::vector<T> pre, x;
    Stats st = softmax_stats(a, pre, x);
    if (st.m == kNegInf<T>) return;  // no visible key: zero gradients, and no key's dK or dV term
    std::vector<T> p(p_.seq_kv, T(0)), dp(p_.seq_kv, T(0));
    for (a.kv = 0; a.kv < p_.seq_kv; ++a.kv) {
      if (x[a.kv] == kNegInf<T>) continue;
      p[a.kv] = prob(st, x[a.kv]);
      if (p[a.kv] == T(0)) continue;  // nothing flows through a zero probability
      dp[a.kv] = d_prob(a);
      st.d += p[a.kv] * dp[a.kv];
    }
    rows_[r] = st;
    std::vector<T> acc(p_.d_qk(), T(0));
    for (a.kv = 0; a.kv < p_.seq_kv; ++a.kv)
      if (p[a.kv] != T(0)) axpy(acc, d_score(a, st, p[a.kv], dp[a.kv], pre[a.kv]), k_of(a));
    for (int64_t c = 0; c < p_.d_qk(); ++c) dq[q_index(p_, a.b, a.q, a.h) + c] = double(rnd(acc[c]));
  }

  // Pass 2, one key row of one KV head: dK and dV summed over the queries of each query head of
  // the group, each head's sum rounded (its own tensor in a plain GQA implementation), then the group's.
  void key_row(size_t c, std::vector<double>& dk, std::vector<double>& dv) const {
    const int64_t kv = int64_t(c) % p_.seq_kv, bhk = int64_t(c) / p_.seq_kv;
    const int64_t b = bhk / p_.heads_kv, hk = bhk % p_.heads_kv;
    std::vector<T> sum_k(p_.d_qk(), T(0)), sum_v(p_.d_v(), T(0));
    for (int64_t h = hk * group_; h < (hk + 1) * group_; ++h) {
      std::vector<T> acc_k(p_.d_qk(), T(0)), acc_v(p_.d_v(), T(0));
      for (int64_t q = 0; q < p_.seq_q; ++q) {
        const At a{b, h, hk, q, kv};
        const Stats& st = rows_[size_t((b * p_.heads_q + h) * p_.seq_q + q)];
        if (st.m == kNegInf<T> || !f_.visible(b, h, q, kv)) continue;
        const T pre = scaled(a), x = modified(a, pre);
        if (x == kNegInf<T>) continue;
        const T p = prob(st, x);
        if (p == T(0)) continue;
        axpy(acc_k, d_score(a, st, p, d_prob(a), pre), q_of(a));
        axpy(acc_v, p, do_of(a));
      }
      for (size_t i = 0; i < sum_k.size(); ++i) sum_k[i] += rnd(acc_k[i]);
      for (size_t i = 0; i < sum_v.size(); ++i) sum_v[i] += rnd(acc_v[i]);
    }
    for (size_t i = 0; i < sum_k.size(); ++i) dk[k_index(p_, b, kv, hk) + i] = double(rnd(sum_k[i]));
    for (size_t i = 0; i < sum_v.size(); ++i) dv[v_index(p_, b, kv, hk) + i] = double(rnd(sum_v[i]));
  }

  const Problem& p_;
  const Inputs<T>& in_;
  const Pointwise& f_;
  const DType dt_;
  const T scale_;
  const int64_t group_;
  std::vector<Stats> rows_;  // pass 1's statistics, by (b, h, q)
};

}  // namespace

std::vector<double> forward_fp64(const Problem& p, const Inputs<double>& in, const Pointwise& f) {
  return Backward<double>(p, in, f).forward();
}

Grads backward_fp64(const Problem& p, const Inputs<double>& in, const Pointwise& f) {
  return Backward<double>(p, in, f).run();
}

namespace {

// One kernel gradient tensor against the references, under verify()'s rule.
//
// The floor is relative to the tensor's largest element: ErrorBound keeps the largest rounding
// error over all elements, at most 2^-8·max|g| for bf16 (2^-11 for fp16), and errors are absolute
// and tensor-wide as in verify(). Gradients have elements near zero (keys few queries see, and the cancellation in
// P∘(dP − D)), and a kernel's error there comes from fp32 sums of terms on the scale of the whole
// tensor, so a floor relative to each element would fail correct kernels. Each of dq, dk, dv is
// judged on its own: their scales differ (dv follows |dO|, dq and dk follow scale·|dS|·|k| or |q|).
Verdict judge(const char* name, DType dt, const std::vector<uint16_t>& got, const std::vector<double>& truth,
              const std::vector<double>& plain, int64_t width) {
  Verdict v;
  for (uint16_t bits : got)
    if (!std::isfinite(from_half_bits(bits, dt))) ++v.nan_count;
  std::ostringstream s;
  if (got.size() != truth.size()) {
    s << "FAIL " << name << " has " << got.size() << " elements, expected " << truth.size();
    v.message = s.str();
    return v;
  }
  ErrorBound bound;
  for (size_t i = 0; i < got.size(); ++i) bound.add(from_half_bits(got[i], dt), truth[i], plain[i], dt);
  v.rows_checked = int64_t(truth.size()) / width;
  v.ok = bound.judge(v) && v.nan_count == 0;
  s << (v.ok ? "PASS " : "FAIL ") << name << " " << ErrorBound::describe(v) << " nonfinite=" << v.nan_count
    << " rows=" << v.rows_checked;
  v.message = s.str();
  return v;
}

}  // namespace

}  // namespace detail

Grads attention_backward_fp64(const Problem& p, const std::vector<uint16_t>& d_o) {
  return detail::backward_fp64(p, detail::widen<double>(p, d_o), detail::Pointwise(p));
}

Grads attention_backward_same_dtype(const Problem& p, const std::vector<uint16_t>& d_o) {
  const detail::Inputs<float> in = detail::widen<float>(p, d_o);
  return detail::Backward<float>(p, in, detail::Pointwise(p)).run();
}

BackwardVerdict verify_backward(const Problem& p, const std::vector<uint16_t>& d_o, const std::vector<uint16_t>& dq,
                                const std::vector<uint16_t>& dk, const std::vector<uint16_t>& dv) {
  const Grads truth = attention_backward_fp64(p, d_o);
  const Grads plain = attention_backward_same_dtype(p, d_o);
  BackwardVerdict v;
  v.dq = detail::judge("dq", p.dtype(), dq, truth.dq, plain.dq, p.d_qk());
  v.dk = detail::judge("dk", p.dtype(), dk, truth.dk, plain.dk, p.d_qk());
  v.dv = detail::judge("dv", p.dtype(), dv, truth.dv, plain.dv, p.d_v());
  v.ok = v.dq.ok && v.dk.ok && v.dv.ok;
  v.message = std::string(v.ok ? "PASS" : "FAIL") + " | " + v.dq.message + " | " + v.dk.message + " | " + v.dv.message;
  return v;
}

}  // namespace flashjit::ref

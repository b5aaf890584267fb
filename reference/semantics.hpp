// Internals the CPU reference's files share (private): a problem's mask and score through the DSL
// interpreter, BSHD indexing, the thread pool, and the error bound of a numerics verdict.
#pragma once

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "compiler/dsl/interpreter.hpp"
#include "compiler/spec_bridge.hpp"
#include "flashjit/reference.hpp"

namespace flashjit::ref::detail {

// The mask and score of a problem, evaluated by the DSL interpreter with the launch's values.
class Semantics {
 public:
  explicit Semantics(const Problem& p) : p_(p), spec_(to_dsl(p.spec)), params_(spec_.default_params()) {
    for (const ParamValue& v : p.params) {
      int slot = spec_.param_slot(v.name);
      if (slot < 0) throw Error(ErrorKind::usage, "reference: unknown param '" + v.name + "'");
      params_[slot] = spec_.params[slot].type == dsl::Type::I32 ? dsl::Value::of_i32(static_cast<int32_t>(v.value))
                                                                 : dsl::Value::of_f32(static_cast<float>(v.value));
    }
    for (const dsl::TensorDecl& t : spec_.tensors) {
      const HostTensor* h = nullptr;
      for (const HostTensor& x : p.tensors)
        if (x.name == t.name) h = &x;
      if (!h) throw Error(ErrorKind::usage, "reference: tensor '" + t.name + "' missing");
      dsl::TensorData d;
      d.elem = t.elem;
      d.data = t.elem == dsl::Type::I32 ? static_cast<const void*>(h->i32.data()) : static_cast<const void*>(h->f32.data());
      for (const dsl::Extent& e : t.dims) d.dims.push_back(extent(e));
      tensors_.push_back(d);
    }
  }
  bool visible(int64_t b, int64_t h, int64_t q, int64_t kv) const {
    if (!spec_.mask) return true;
    return dsl::eval_mask(*spec_.mask, env(b, h, q, kv, 0.f));
  }
  float score(int64_t b, int64_t h, int64_t q, int64_t kv, float s) const {
    if (!spec_.score) return s;
    return dsl::eval_score(*spec_.score, env(b, h, q, kv, s));
  }
  // d score'/d score at s: the front end's symbolic derivative (dsl::Spec::score_grad).
  float score_grad(int64_t b, int64_t h, int64_t q, int64_t kv, float s) const {
    if (!spec_.score) return 1.f;
    return dsl::eval_score(*spec_.score_grad, env(b, h, q, kv, s));
  }
  bool identity_score() const { return !spec_.score; }

 private:
  int64_t extent(const dsl::Extent& e) const {
    return dsl::extent_size(e, launch_sizes(p_));
  }
  dsl::Env env(int64_t b, int64_t h, int64_t q, int64_t kv, float s) const {
    dsl::Env e;
    e.b = int32_t(b);
    e.h = int32_t(h);
    e.h_kv = int32_t(h / (p_.heads_q / p_.heads_kv));
    e.q = int32_t(q);
    e.kv = int32_t(kv);
    e.seq_q = int32_t(p_.seq_q);
    e.seq_kv = int32_t(p_.seq_kv);
    e.score = s;
    e.params = params_;
    e.tensors = tensors_;
    return e;
  }
  const Problem& p_;
  dsl::Spec spec_;
  std::vector<dsl::Value> params_;
  std::vector<dsl::TensorData> tensors_;
};

inline size_t q_index(const Problem& p, int64_t b, int64_t s, int64_t h) { return ((b * p.seq_q + s) * p.heads_q + h) * p.d_qk(); }
inline size_t k_index(const Problem& p, int64_t b, int64_t s, int64_t h) { return ((b * p.seq_kv + s) * p.heads_kv + h) * p.d_qk(); }
inline size_t v_index(const Problem& p, int64_t b, int64_t s, int64_t h) { return ((b * p.seq_kv + s) * p.heads_kv + h) * p.d_v(); }
// O and dO share q's rows with d_v columns.
inline size_t o_index(const Problem& p, int64_t b, int64_t s, int64_t h) { return ((b * p.seq_q + s) * p.heads_q + h) * p.d_v(); }

// Runs body(i) for i in [0, n) on all cores: the fp64 reference dominates test time otherwise.
template <class Body>
void parallel_for(size_t n, Body body) {
  unsigned workers = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 32));
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (size_t i = w; i < n; i += workers) body(i);
    });
  for (auto& t : pool) t.join();
}

// FlashAttention's test rule for one output tensor: the kernel's error against fp64 at most twice
// the error of the same-dtype straightforward implementation, plus a floor. Errors are absolute
// and tensor-wide (the largest over the elements added).
class ErrorBound {
 public:
  void add(double got, double truth, double plain, DType dt) {
    // A non-finite reference element (a NaN input or score) is a mismatch unless the output holds
    // the same value; std::max would drop a NaN difference.
    const bool same = got == truth || (std::isnan(got) && std::isnan(truth));
    max_err_ = std::max(max_err_, std::isfinite(got) && std::isfinite(truth) ? std::abs(got - truth) : same ? 0 : INFINITY);
    baseline_err_ = std::max(baseline_err_, std::abs(plain - truth));
    rounding_ = std::max(rounding_, std::abs(double(round_to(float(truth), dt)) - truth));
  }
  // Fills v's max_err, baseline_err, floor and limit; true when max_err is within the limit.
  bool judge(Verdict& v) const {
    v.max_err = max_err_;
    v.baseline_err = baseline_err_;
    // The floor is twice the rounding of the exact answer to dtype: an output rounded correctly
    // is never failed for its own rounding, even where the same-dtype baseline happens to be exact.
    v.floor = 2 * rounding_;
    v.limit = 2 * v.baseline_err + v.floor + 1e-6;
    return v.max_err <= v.limit;
  }
  // "max_err=… limit=… (2x same-dtype … + floor …)", for verdict messages.
  static std::string describe(const Verdict& v) {
    std::ostringstream s;
    s << "max_err=" << v.max_err << " limit=" << v.limit << " (2x same-dtype " << v.baseline_err << " + floor " << v.floor
      << ")";
    return s.str();
  }

 private:
  double max_err_ = 0, baseline_err_ = 0, rounding_ = 0;
};

}  // namespace flashjit::ref::detail

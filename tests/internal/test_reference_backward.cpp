// The fp64 reference backward against central finite differences of the fp64 forward, on tiny
// GQA shapes, under every kind of mask and with score modifiers. The backward runs on inputs
// given as doubles (reference/backward.hpp), so the differences perturb fp64 values, not dtype bits.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <utility>

#include "reference/backward.hpp"

using namespace flashjit;
using namespace flashjit::ref;
using namespace flashjit::ref::detail;

namespace {

struct Shape {
  int64_t batch = 1, heads_q = 2, heads_kv = 1, seq_q = 5, seq_kv = 7;
  int d_qk = 8, d_v = 16;
};

std::vector<uint16_t> normal_bits(size_t n, DType dt, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  std::vector<uint16_t> out(n);
  for (auto& x : out) x = to_half_bits(normal(rng), dt);
  return out;
}

// A problem of random normal q, k, v (and spec tensors), with its random upstream gradient dO.
struct Case {
  Problem p;
  std::vector<uint16_t> d_o;
};

Case make_case(AttentionSpec spec, const Shape& s, uint64_t seed) {
  Case c;
  spec.dtype = DType::f16;
  spec.head_dim_qk = s.d_qk;
  spec.head_dim_v = s.d_v;
  c.p.spec = spec;
  c.p.batch = s.batch;
  c.p.heads_q = s.heads_q;
  c.p.heads_kv = s.heads_kv;
  c.p.seq_q = s.seq_q;
  c.p.seq_kv = s.seq_kv;
  std::mt19937_64 rng(seed);
  c.p.q = normal_bits(size_t(s.batch * s.seq_q * s.heads_q * s.d_qk), spec.dtype, rng);
  c.p.k = normal_bits(size_t(s.batch * s.seq_kv * s.heads_kv * s.d_qk), spec.dtype, rng);
  c.p.v = normal_bits(size_t(s.batch * s.seq_kv * s.heads_kv * s.d_v), spec.dtype, rng);
  c.d_o = normal_bits(size_t(s.batch * s.seq_q * s.heads_q * s.d_v), spec.dtype, rng);
  fill_spec_tensors(c.p, seed + 1);
  return c;
}

double loss(const Problem& p, const Inputs<double>& in, const Pointwise& f) {
  const std::vector<double> o = forward_fp64(p, in, f);
  double l = 0;
  for (size_t i = 0; i < o.size(); ++i) l += o[i] * in.d_o[i];
  return l;
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}

// Per tensor (dq, dk, dv): the largest |central difference of L = Σ O∘dO − backward's gradient|
// over every element, relative to the tensor's largest |gradient|. Step 1e-6·max(1, |x|): the
// truncation error (~h²) and the cancellation error (~1e-16·|L|/h) both stay near 1e-10.
std::array<double, 3> finite_difference_error(const Case& c, const Pointwise& f) {
  Inputs<double> in = widen<double>(c.p, c.d_o);
  const Grads g = backward_fp64(c.p, in, f);
  std::array<double, 3> worst{};
  const std::array<std::pair<std::vector<double>*, const std::vector<double>*>, 3> pairs{
      {{&in.q, &g.dq}, {&in.k, &g.dk}, {&in.v, &g.dv}}};
  for (size_t t = 0; t < 3; ++t) {
    auto [x, grad] = pairs[t];
    REQUIRE(x->size() == grad->size());
    const double scale = max_abs(*grad);
    REQUIRE(scale > 0);
    for (size_t i = 0; i < x->size(); ++i) {
      REQUIRE(std::isfinite((*grad)[i]));
      const double x0 = (*x)[i], h = 1e-6 * std::max(1.0, std::abs(x0));
      (*x)[i] = x0 + h;
      const double up = loss(c.p, in, f);
      (*x)[i] = x0 - h;
      const double down = loss(c.p, in, f);
      (*x)[i] = x0;
      worst[t] = std::max(worst[t], std::abs((up - down) / (2 * h) - (*grad)[i]) / scale);
    }
  }
  return worst;
}

void check_finite_differences(const Case& c, const Pointwise& f) {
  const auto err = finite_difference_error(c, f);
  INFO("relative errors dq " << err[0] << " dk " << err[1] << " dv " << err[2]);
  CHECK(err[0] <= 1e-6);
  CHECK(err[1] <= 1e-6);
  CHECK(err[2] <= 1e-6);
}

// The differentiated forward is the reference forward: every row as attention_fp64 gives it.
void check_forward_matches(const Case& c, const Pointwise& f) {
  const std::vector<double> o = forward_fp64(c.p, widen<double>(c.p, c.d_o), f);
  const std::vector<RowId> ids = pick_rows(c.p, 1 << 20);
  const Rows rows = attention_fp64(c.p, ids);
  const int64_t d_v = c.p.d_v();
  for (size_t r = 0; r < ids.size(); ++r)
    for (int64_t i = 0; i < d_v; ++i)
      CHECK(o[o_index(c.p, ids[r].b, ids[r].q, ids[r].h) + i] == Approx(rows.o[r * d_v + i]).margin(1e-12));
}

// The score modifier and its derivative as closed forms in double, in place of the f32 DSL.
class ClosedForm : public Pointwise {
 public:
  using Fn = std::function<double(int64_t h, int64_t q, int64_t kv, double x)>;
  ClosedForm(const Problem& p, Fn score, Fn grad) : Pointwise(p), score_(std::move(score)), grad_(std::move(grad)) {}
  double score(int64_t, int64_t h, int64_t q, int64_t kv, double x) const override { return score_(h, q, kv, x); }
  double grad(int64_t, int64_t h, int64_t q, int64_t kv, double x) const override { return grad_(h, q, kv, x); }

 private:
  Fn score_, grad_;
};

// The spec's own score and score_grad (f32, through the interpreter) agree with the closed forms
// to f32 precision at every position, and so do the gradients computed with either.
void check_dsl_matches(const Case& c, const ClosedForm& closed) {
  const Pointwise dsl(c.p);
  for (int64_t h = 0; h < c.p.heads_q; ++h)
    for (int64_t q = 0; q < c.p.seq_q; ++q)
      for (int64_t kv = 0; kv < c.p.seq_kv; ++kv)
        for (double x : {-5.0, -1.5, -0.25, 0.0, 0.75, 3.0}) {
          CHECK(dsl.score(0, h, q, kv, x) == Approx(closed.score(0, h, q, kv, x)).epsilon(1e-6).margin(1e-6));
          CHECK(dsl.grad(0, h, q, kv, x) == Approx(closed.grad(0, h, q, kv, x)).epsilon(1e-6).margin(1e-6));
        }
  const Inputs<double> in = widen<double>(c.p, c.d_o);
  const Grads a = backward_fp64(c.p, in, dsl), b = backward_fp64(c.p, in, closed);
  for (auto [x, y] : {std::pair{&a.dq, &b.dq}, {&a.dk, &b.dk}, {&a.dv, &b.dv}}) {
    const double scale = max_abs(*y);
    for (size_t i = 0; i < x->size(); ++i) CHECK(std::abs((*x)[i] - (*y)[i]) <= 1e-5 * scale);
  }
}

AttentionSpec with_mask(const std::string& mask) {
  AttentionSpec s;
  s.mask = mask;
  return s;
}

}  // namespace

TEST_CASE("reference backward: fp64 gradients are the finite differences of the forward, every mask kind",
          "[reference][backward]") {
  struct MaskCase {
    AttentionSpec spec;
    Shape shape;
  };
  AttentionSpec document = with_mask("causal && document(doc)");
  document.tensors = {{"doc", ScalarType::i32, {"batch", "seq_kv"}}};
  Shape two_batches;
  two_batches.batch = 2;
  Shape mqa_square;  // seq_q == seq_kv, four query heads on one KV head
  mqa_square.heads_q = 4;
  mqa_square.seq_q = mqa_square.seq_kv = 6;
  const std::vector<MaskCase> cases = {{with_mask("none"), {}},
                                       {with_mask("causal"), {}},
                                       {with_mask("causal_br"), {}},
                                       {with_mask("window(2, 1)"), mqa_square},
                                       {with_mask("kv < q - 2"), {}},
                                       {document, two_batches}};
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case c = make_case(cases[i].spec, cases[i].shape, 11 + i);
    INFO("mask " << c.p.spec.mask);
    const Pointwise f(c.p);
    check_forward_matches(c, f);
    check_finite_differences(c, f);
  }
}

TEST_CASE("reference backward: rows that see no key give exactly zero gradients", "[reference][backward]") {
  // kv < q - 2: queries 0..2 see nothing, 3 and 4 see keys 0 and 0..1, keys 2..6 are seen by nobody.
  const Case c = make_case(with_mask("kv < q - 2"), {}, 5);
  const Grads g = attention_backward_fp64(c.p, c.d_o);
  const Grads plain = attention_backward_same_dtype(c.p, c.d_o);
  for (const Grads* x : {&g, &plain}) {
    for (int64_t h = 0; h < c.p.heads_q; ++h)
      for (int64_t q = 0; q < c.p.seq_q; ++q)
        for (int64_t i = 0; i < c.p.d_qk(); ++i) {
          const double v = x->dq[q_index(c.p, 0, q, h) + i];
          CHECK(std::isfinite(v));
          if (q < 3) CHECK(v == 0.0);
        }
    for (int64_t kv = 0; kv < c.p.seq_kv; ++kv) {
      for (int64_t i = 0; i < c.p.d_qk(); ++i) CHECK((kv < 2 || x->dk[k_index(c.p, 0, kv, 0) + i] == 0.0));
      for (int64_t i = 0; i < c.p.d_v(); ++i) CHECK((kv < 2 || x->dv[v_index(c.p, 0, kv, 0) + i] == 0.0));
    }
  }
  CHECK(max_abs(g.dq) > 0);  // query 4 does get a gradient from its two keys
}

TEST_CASE("reference backward: a score modifier's derivative is chained (softcap by a param, ALiBi by a tensor)",
          "[reference][backward]") {
  SECTION("softcap 2 through a launch param over its default") {
    AttentionSpec spec = with_mask("causal");
    spec.score = "cap * tanh(score / cap)";
    spec.params = {{"cap", ScalarType::f32, 30.0}};
    Case c = make_case(spec, {}, 21);
    c.p.params = {{"cap", 2.0}};
    c.p.scale = 1.0f;  // scores of a few units, where a cap of 2 bends them
    const ClosedForm closed(
        c.p, [](int64_t, int64_t, int64_t, double x) { return 2 * std::tanh(x / 2); },
        [](int64_t, int64_t, int64_t, double x) { return 1 - std::tanh(x / 2) * std::tanh(x / 2); });
    check_dsl_matches(c, closed);
    check_finite_differences(c, closed);
    // A backward that forgets the chain rule is caught: the check can fail.
    const ClosedForm unchained(
        c.p, [](int64_t, int64_t, int64_t, double x) { return 2 * std::tanh(x / 2); },
        [](int64_t, int64_t, int64_t, double) { return 1.0; });
    const auto err = finite_difference_error(c, unchained);
    CHECK(std::max(err[0], err[1]) > 1e-2);
  }
  SECTION("ALiBi slopes from an f32 tensor, two KV heads of two query heads each") {
    AttentionSpec spec = with_mask("none");
    spec.score = "score - slope[h] * (q - kv)";
    spec.tensors = {{"slope", ScalarType::f32, {"heads_q"}}};
    Shape s;
    s.heads_q = 4;
    s.heads_kv = 2;
    const Case c = make_case(spec, s, 31);
    const std::vector<float>& slope = c.p.tensors.at(0).f32;
    const ClosedForm closed(
        c.p, [&](int64_t h, int64_t q, int64_t kv, double x) { return x - double(slope[h]) * double(q - kv); },
        [](int64_t, int64_t, int64_t, double) { return 1.0; });
    check_dsl_matches(c, closed);
    check_finite_differences(c, closed);
  }
}

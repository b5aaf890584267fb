// The reference backward's same-dtype yardstick and the verdict the GPU backward tests rely on.
// (Its fp64 gradients are checked against finite differences in tests/internal/.)
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "flashjit/reference.hpp"

using namespace flashjit;
using namespace flashjit::ref;

namespace {

// bf16, causal with seq_kv > seq_q (keys 37..52 are seen by no query), GQA, d_qk ≠ d_v.
struct Case {
  Problem p;
  std::vector<uint16_t> d_o;
};

Case make_case(const std::string& mask, DType dt) {
  Case c;
  c.p.spec.dtype = dt;
  c.p.spec.mask = mask;
  c.p.spec.head_dim_qk = 16;
  c.p.spec.head_dim_v = 32;
  c.p.seq_q = 37;
  c.p.seq_kv = 53;
  c.p.heads_q = 2;
  c.p.heads_kv = 1;
  std::mt19937 rng(3);
  std::normal_distribution<float> n;
  auto fill = [&](std::vector<uint16_t>& t, int64_t count) {
    for (int64_t i = 0; i < count; ++i) t.push_back(to_half_bits(n(rng), dt));
  };
  fill(c.p.q, c.p.seq_q * c.p.heads_q * 16);
  fill(c.p.k, c.p.seq_kv * c.p.heads_kv * 16);
  fill(c.p.v, c.p.seq_kv * c.p.heads_kv * 32);
  fill(c.d_o, c.p.seq_q * c.p.heads_q * 32);
  return c;
}

std::vector<uint16_t> to_bits(const std::vector<double>& x, DType dt) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = to_half_bits(float(x[i]), dt);
  return out;
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m = std::max(m, std::abs(v));
  return m;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("reference backward: the same-dtype gradients are close to fp64 but not equal", "[reference][backward]") {
  for (DType dt : {DType::bf16, DType::f16}) {
    const Case c = make_case("causal", dt);
    const Grads truth = attention_backward_fp64(c.p, c.d_o);
    const Grads plain = attention_backward_same_dtype(c.p, c.d_o);
    for (auto [t, s] : {std::pair{&truth.dq, &plain.dq}, {&truth.dk, &plain.dk}, {&truth.dv, &plain.dv}}) {
      REQUIRE(t->size() == s->size());
      const double err = max_diff(*t, *s), scale = max_abs(*t);
      INFO("dtype " << (dt == DType::bf16 ? "bf16" : "fp16") << " error " << err << " of max " << scale);
      CHECK(err > 0);
      // A few units in the dtype's last place of the largest gradient (bf16: 2^-8, fp16: 2^-11).
      CHECK(err <= (dt == DType::bf16 ? 0.03 : 0.004) * scale);
    }
  }
}

TEST_CASE("reference backward: verify_backward passes rounded fp64 gradients and fails wrong ones",
          "[reference][backward]") {
  const Case c = make_case("causal", DType::bf16);
  const DType dt = c.p.dtype();
  const Grads truth = attention_backward_fp64(c.p, c.d_o);
  const std::vector<uint16_t> dq = to_bits(truth.dq, dt), dk = to_bits(truth.dk, dt), dv = to_bits(truth.dv, dt);
  const BackwardVerdict good = verify_backward(c.p, c.d_o, dq, dk, dv);
  INFO(good.message);
  CHECK(good.ok);
  CHECK(good.dq.rows_checked == c.p.seq_q * c.p.heads_q);
  CHECK(good.dk.rows_checked == c.p.seq_kv * c.p.heads_kv);
  CHECK(good.dv.rows_checked == c.p.seq_kv * c.p.heads_kv);
  for (const Verdict* v : {&good.dq, &good.dk, &good.dv}) {
    CHECK(v->baseline_err > 0);
    CHECK(v->floor > 0);
    CHECK(v->limit == Approx(2 * v->baseline_err + v->floor + 1e-6));
    CHECK(v->max_lse_err == 0);
  }
  // The same-dtype implementation passes its own bar.
  const Grads plain = attention_backward_same_dtype(c.p, c.d_o);
  CHECK(verify_backward(c.p, c.d_o, to_bits(plain.dq, dt), to_bits(plain.dk, dt), to_bits(plain.dv, dt)).ok);

  SECTION("one element of dk off by a quarter of the largest") {
    auto wrong = dk;
    const size_t i = 5 * 16 + 3;  // key 5, seen by queries 5..36
    wrong[i] = to_half_bits(from_half_bits(wrong[i], dt) + 0.25f * float(max_abs(truth.dk)), dt);
    const BackwardVerdict v = verify_backward(c.p, c.d_o, dq, wrong, dv);
    INFO(v.message);
    CHECK_FALSE(v.ok);
    CHECK_FALSE(v.dk.ok);
    CHECK(v.dq.ok);
    CHECK(v.dv.ok);
  }
  SECTION("a NaN in the dv row of a key no query sees") {
    auto nan = dv;
    nan.back() = 0xFFFF;  // key 52, head 0: its exact gradient is 0
    REQUIRE(truth.dv.back() == 0.0);
    const BackwardVerdict v = verify_backward(c.p, c.d_o, dq, dk, nan);
    INFO(v.message);
    CHECK_FALSE(v.ok);
    CHECK_FALSE(v.dv.ok);
    CHECK(v.dv.nan_count == 1);
    CHECK(v.dq.ok);
  }
  SECTION("dq without one key's contribution") {
    // dQᵢ = scale·Σⱼ Pᵢⱼ(dPᵢⱼ − Dᵢ)·kⱼ with D = rowsum(dO∘O) (FlashAttention-2, Algorithm 2), from
    // the forward reference's O and LSE: first all keys (an independent check of the gradient),
    // then all but key 0, which every query sees under the causal mask.
    const std::vector<RowId> ids = pick_rows(c.p, 1 << 20);
    const Rows fwd = attention_fp64(c.p, ids);
    const double scale = 0.25;  // 1/sqrt(d_qk), exact (Problem::effective_scale is not exported)
    auto val = [&](const std::vector<uint16_t>& t, size_t i) { return double(from_half_bits(t[i], dt)); };
    std::vector<double> all(truth.dq.size(), 0.0), dropped(truth.dq.size(), 0.0);
    for (size_t r = 0; r < ids.size(); ++r) {
      const RowId id = ids[r];
      const size_t qi = (id.q * 2 + id.h) * 16, oi = (id.q * 2 + id.h) * 32;
      double d = 0;
      for (int e = 0; e < 32; ++e) d += val(c.d_o, oi + e) * fwd.o[r * 32 + e];
      for (int64_t kv = 0; kv <= id.q; ++kv) {
        double s = 0, dp = 0;
        for (int e = 0; e < 16; ++e) s += val(c.p.q, qi + e) * val(c.p.k, kv * 16 + e);
        for (int e = 0; e < 32; ++e) dp += val(c.d_o, oi + e) * val(c.p.v, kv * 32 + e);
        const double ds = std::exp(s * scale - fwd.lse[r]) * (dp - d) * scale;
        for (int e = 0; e < 16; ++e) {
          all[qi + e] += ds * val(c.p.k, kv * 16 + e);
          if (kv != 0) dropped[qi + e] += ds * val(c.p.k, kv * 16 + e);
        }
      }
    }
    CHECK(max_diff(all, truth.dq) <= 1e-9 * max_abs(truth.dq));
    const BackwardVerdict v = verify_backward(c.p, c.d_o, to_bits(dropped, dt), dk, dv);
    INFO(v.message);
    CHECK_FALSE(v.ok);
    CHECK_FALSE(v.dq.ok);
    CHECK(v.dk.ok);
  }
  SECTION("a tensor of the wrong size fails; a d_o of the wrong size is a usage error") {
    auto shorter = dq;
    shorter.pop_back();
    const BackwardVerdict v = verify_backward(c.p, c.d_o, shorter, dk, dv);
    INFO(v.message);
    CHECK_FALSE(v.ok);
    CHECK_FALSE(v.dq.ok);
    auto short_do = c.d_o;
    short_do.pop_back();
    CHECK_THROWS_AS(attention_backward_fp64(c.p, short_do), flashjit::Error);
  }
}

TEST_CASE("reference backward: fully masked rows pass as zeros and stay finite", "[reference][backward]") {
  // kv < q - 3: queries 0..3 see no key.
  const Case c = make_case("kv < q - 3", DType::f16);
  const Grads truth = attention_backward_fp64(c.p, c.d_o);
  for (double x : truth.dq) CHECK(std::isfinite(x));
  for (size_t i = 0; i < size_t(4 * 2 * 16); ++i) CHECK(truth.dq[i] == 0.0);
  const DType dt = c.p.dtype();
  const BackwardVerdict v = verify_backward(c.p, c.d_o, to_bits(truth.dq, dt), to_bits(truth.dk, dt), to_bits(truth.dv, dt));
  INFO(v.message);
  CHECK(v.ok);
}

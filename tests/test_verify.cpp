// The numerics verdict where it could pass silently: LSE rows the output check does not sample,
// NaN in the reference, rows with no visible key, and an output that is wrong by less than the
// tuner's old config-to-config bound (a kernel that drops key tile 0 for later rows).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "flashjit/reference.hpp"

using namespace flashjit;
using namespace flashjit::ref;

namespace {

Problem random_problem(const std::string& mask, int64_t seq_q, int64_t seq_kv, int d, DType dt, uint64_t seed) {
  Problem p;
  p.spec.dtype = dt;
  p.spec.mask = mask;
  p.spec.head_dim_qk = p.spec.head_dim_v = d;
  p.seq_q = seq_q, p.seq_kv = seq_kv;
  p.heads_q = 2, p.heads_kv = 1;
  std::mt19937 rng(seed);
  std::normal_distribution<float> n;
  for (auto* t : {&p.q, &p.k, &p.v}) {
    const int64_t count = (t == &p.q ? p.seq_q * p.heads_q : p.seq_kv * p.heads_kv) * d;
    for (int64_t i = 0; i < count; ++i) t->push_back(to_half_bits(n(rng), dt));
  }
  return p;
}

// A kernel's output and LSE for `p` that is the fp64 answer rounded, computed on `rows` (the rest
// left 0 and −inf: unchecked but finite).
struct Output {
  std::vector<uint16_t> o;
  std::vector<float> lse;
};
Output rounded_answer(const Problem& p, const std::vector<RowId>& rows, const Problem& computed_as) {
  Output out;
  out.o.assign(size_t(p.batch * p.seq_q * p.heads_q * p.d_v()), 0);
  out.lse.assign(size_t(p.batch * p.heads_q * p.seq_q), -INFINITY);
  const Rows r = attention_fp64(computed_as, rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowId id = rows[i];
    for (int64_t c = 0; c < p.d_v(); ++c)
      out.o[((id.b * p.seq_q + id.q) * p.heads_q + id.h) * p.d_v() + c] = to_half_bits(float(r.o[i * p.d_v() + c]), p.dtype());
    out.lse[(id.b * p.heads_q + id.h) * p.seq_q + id.q] = float(r.lse[i]);
  }
  return out;
}

std::vector<RowId> all_rows(const Problem& p) { return pick_rows(p, p.batch * p.heads_q * p.seq_q); }

}  // namespace

TEST_CASE("verify: LSE is compared on every row, not only the sampled output rows", "[reference][verify]") {
  const Problem p = random_problem("causal", 300, 300, 16, DType::bf16, 11);
  Output out = rounded_answer(p, all_rows(p), p);
  const Verdict good = verify(p, out.o, &out.lse, /*max_rows=*/64);
  INFO(good.message);
  REQUIRE(good.ok);
  REQUIRE(good.rows_checked < p.heads_q * p.seq_q);
  CHECK(good.lse_rows_checked == p.heads_q * p.seq_q);
  // Row 200 of head 1 is not among the sampled output rows (first/last 16 and a spread).
  const Expected e = expect(p, 64);
  for (const RowId& id : e.rows) REQUIRE_FALSE((id.h == 1 && id.q == 200));
  out.lse[1 * p.seq_q + 200] += 0.01f;
  const Verdict bad = verify(p, out.o, &out.lse, 64);
  INFO(bad.message);
  CHECK_FALSE(bad.ok);
  CHECK(bad.max_lse_err > 0.005);
}

TEST_CASE("verify: a NaN in the reference fails a finite output, and a NaN output fails a finite reference",
          "[reference][verify]") {
  const Problem clean = random_problem("none", 40, 40, 16, DType::f16, 12);
  const Output out = rounded_answer(clean, all_rows(clean), clean);
  REQUIRE(verify(clean, out.o, &out.lse).ok);
  Problem nan_q = clean;
  nan_q.q[0] = 0x7E00;  // a NaN in query 0 of head 0: that row's reference is NaN
  REQUIRE(std::isnan(attention_fp64(nan_q, {{0, 0, 0}}).o[0]));
  const Verdict v = verify(nan_q, out.o, &out.lse);
  INFO(v.message);
  CHECK_FALSE(v.ok);
  CHECK(std::isinf(v.max_err));
  CHECK_FALSE(verify(nan_q, out.o, nullptr).ok);  // the output alone fails too, LSE aside
  auto nan_out = out.o;
  nan_out[5] = 0x7E00;
  const Verdict vn = verify(clean, nan_out, &out.lse);
  CHECK_FALSE(vn.ok);
  CHECK(vn.nan_count == 1);
}

TEST_CASE("verify: a fully masked row must be O = 0 with LSE = -inf", "[reference][verify]") {
  // causal_br with 20 queries over 8 keys: queries 0..11 see no key.
  const Problem p = random_problem("causal_br", 20, 8, 16, DType::bf16, 13);
  const Output out = rounded_answer(p, all_rows(p), p);
  const Verdict good = verify(p, out.o, &out.lse);
  INFO(good.message);
  REQUIRE(good.ok);
  REQUIRE(out.lse[3] == -INFINITY);
  auto nan_o = out.o;
  nan_o[3 * p.heads_q * 16] = 0xFFFF;  // query 3, head 0: the poison left unwritten
  CHECK_FALSE(verify(p, nan_o, &out.lse).ok);
  auto nonzero_o = out.o;
  nonzero_o[3 * p.heads_q * 16] = to_half_bits(0.5f, p.dtype());
  CHECK_FALSE(verify(p, nonzero_o, &out.lse).ok);
  for (float wrong : {0.f, INFINITY, NAN}) {
    auto lse = out.lse;
    lse[3] = wrong;
    INFO("LSE of the masked row " << wrong);
    CHECK_FALSE(verify(p, out.o, &lse).ok);
  }
  auto finite_row = out.lse;
  finite_row[p.seq_q - 1] = -INFINITY;  // the last query sees every key
  CHECK_FALSE(verify(p, out.o, &finite_row).ok);
}

TEST_CASE("verify: a kernel that drops key tile 0 for later rows fails, one expect() judging many outputs",
          "[reference][verify]") {
  // s = 2048, d = 128, no mask: rows from 64 on lose keys 0..63. Such an output was 0.027 from a
  // correct config's, under the 0.1 config-to-config bound the tuner used to apply.
  Problem p = random_problem("none", 2048, 2048, 128, DType::bf16, 14);
  p.heads_q = p.heads_kv = 1;
  p.q.resize(p.seq_q * 128);
  const Expected e = expect_rows(p, pick_rows(p, 256));  // what the tuner does: LSE on those rows
  const Output good = rounded_answer(p, e.rows, p);
  Problem dropped = p;
  dropped.spec.mask = "q < 64 || kv >= 64";
  const Output bad = rounded_answer(p, e.rows, dropped);
  double diff = 0;
  for (size_t i = 0; i < good.o.size(); ++i)
    diff = std::max(diff, double(std::abs(from_half_bits(good.o[i], p.dtype()) - from_half_bits(bad.o[i], p.dtype()))));
  INFO("largest difference from the correct output " << diff);
  CHECK(diff < 0.1);
  CHECK(diff > 0);
  const Verdict g = judge(p, e, good.o, &good.lse);
  INFO(g.message);
  CHECK(g.ok);
  const Verdict b = judge(p, e, bad.o, nullptr);
  INFO(b.message);
  CHECK_FALSE(b.ok);
  CHECK(b.max_err > b.limit);
  CHECK_FALSE(judge(p, e, good.o, &bad.lse).ok);
}

TEST_CASE("verify: an output computed with the default scale fails a problem with another scale", "[reference][verify]") {
  // What a kernel that ignored `scale` would write: the GPU cases with non-default scales
  // (tests/test_gpu_boundaries.cpp, tests/test_gpu_matrix.cpp) rely on the reference telling.
  Problem p = random_problem("causal", 90, 90, 32, DType::bf16, 15);
  const Output default_scale = rounded_answer(p, all_rows(p), p);
  for (float scale : {0.05f, 0.3f, 1.0f}) {
    Problem scaled = p;
    scaled.scale = scale;
    const Output right = rounded_answer(scaled, all_rows(scaled), scaled);
    INFO("scale " << scale);
    CHECK(verify(scaled, right.o, &right.lse).ok);
    CHECK_FALSE(verify(scaled, default_scale.o, &default_scale.lse).ok);
    CHECK_FALSE(verify(scaled, default_scale.o, nullptr).ok);
  }
}

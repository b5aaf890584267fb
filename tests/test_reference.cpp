// The CPU reference and the numerics verdict the GPU tests rely on.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "flashjit/reference.hpp"

using namespace flashjit;
using namespace flashjit::ref;

TEST_CASE("reference: fp16/bf16 conversions round to nearest even", "[reference]") {
  CHECK(to_half_bits(1.0f, DType::bf16) == 0x3F80);
  CHECK(to_half_bits(1.0f, DType::f16) == 0x3C00);
  CHECK(to_half_bits(-2.0f, DType::f16) == 0xC000);
  // 1 + 2^-8 is exactly halfway between bf16 neighbours 1 and 1 + 2^-7: ties go to even (1.0).
  CHECK(to_half_bits(1.0f + std::ldexp(1.0f, -8), DType::bf16) == 0x3F80);
  CHECK(to_half_bits(1.0f + 3 * std::ldexp(1.0f, -8), DType::bf16) == 0x3F82);
  CHECK(std::isnan(from_half_bits(0xFFFF, DType::bf16)));
  CHECK(std::isnan(from_half_bits(0xFFFF, DType::f16)));
  for (float x : {0.1f, -3.75f, 1000.5f}) CHECK(std::abs(round_to(x, DType::bf16) - x) <= std::abs(x) * 0.004f);
}

namespace {

Problem tiny(const std::string& mask) {
  // One head, d = 8, two queries, two keys: small enough to compute by hand.
  Problem p;
  p.spec.dtype = DType::f16;
  p.spec.mask = mask;
  p.spec.head_dim_qk = p.spec.head_dim_v = 8;
  p.seq_q = 2;
  p.seq_kv = 2;
  p.scale = 1.0f;
  auto bits = [](std::vector<float> v) {
    std::vector<uint16_t> out;
    for (float x : v) out.push_back(to_half_bits(x, DType::f16));
    return out;
  };
  p.q = bits({1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  p.k = bits({2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  p.v = bits({1, 2, 3, 4, 5, 6, 7, 8, -1, -2, -3, -4, -5, -6, -7, -8});
  return p;
}

}  // namespace

TEST_CASE("reference: fp64 attention matches a hand computation", "[reference]") {
  Problem p = tiny("none");
  Rows r = attention_fp64(p, {{0, 0, 0}, {0, 0, 1}});
  // Row 0: scores (2, 0) → weights e^2/(e^2+1), 1/(e^2+1); output = (w0 − w1)·v0.
  const double w0 = std::exp(2.0) / (std::exp(2.0) + 1), w1 = 1 - w0;
  for (int c = 0; c < 8; ++c) CHECK(r.o[c] == Approx((w0 - w1) * (c + 1)).epsilon(1e-12));
  CHECK(r.lse[0] == Approx(std::log(std::exp(2.0) + 1)).epsilon(1e-12));
  // Row 1: scores (0, 1).
  const double u0 = 1 / (1 + std::exp(1.0)), u1 = 1 - u0;
  CHECK(r.o[8] == Approx(u0 - u1).epsilon(1e-12));
  Problem c = tiny("causal");
  Rows rc = attention_fp64(c, {{0, 0, 0}});
  for (int i = 0; i < 8; ++i) CHECK(rc.o[i] == Approx(i + 1.0));  // query 0 sees key 0 only
  CHECK(rc.lse[0] == Approx(2.0));
}

TEST_CASE("reference: a row with every key masked gives O = 0 and LSE = -inf", "[reference]") {
  Problem p = tiny("causal");
  p.seq_kv = 0;
  p.k.clear();
  p.v.clear();
  Rows r = attention_fp64(p, {{0, 0, 1}});
  for (int c = 0; c < 8; ++c) CHECK(r.o[c] == 0.0);
  CHECK(std::isinf(r.lse[0]));
  CHECK(r.lse[0] < 0);
}

TEST_CASE("reference: verify() passes a rounded exact answer and fails wrong, NaN or short outputs", "[reference]") {
  Problem p;
  p.spec.dtype = DType::bf16;
  p.spec.mask = "causal";
  p.spec.head_dim_qk = p.spec.head_dim_v = 16;
  p.seq_q = 37;
  p.seq_kv = 53;
  p.heads_q = 2;
  p.heads_kv = 1;
  std::mt19937 rng(7);
  std::normal_distribution<float> n;
  for (auto* t : {&p.q, &p.k, &p.v}) {
    size_t count = t == &p.q ? p.seq_q * p.heads_q * 16 : p.seq_kv * p.heads_kv * 16;
    for (size_t i = 0; i < count; ++i) t->push_back(to_half_bits(n(rng), p.dtype()));
  }
  auto ids = pick_rows(p, 1 << 20);
  REQUIRE(ids.size() == size_t(p.seq_q * p.heads_q));
  Rows truth = attention_fp64(p, ids);
  std::vector<uint16_t> out(p.seq_q * p.heads_q * p.d_v());
  std::vector<float> lse(p.heads_q * p.seq_q);
  for (size_t r = 0; r < ids.size(); ++r) {
    for (int c = 0; c < 16; ++c)
      out[(ids[r].q * p.heads_q + ids[r].h) * 16 + c] = to_half_bits(float(truth.o[r * 16 + c]), p.dtype());
    lse[ids[r].h * p.seq_q + ids[r].q] = float(truth.lse[r]);
  }
  Verdict good = verify(p, out, &lse);
  INFO(good.message);
  CHECK(good.ok);
  CHECK(good.baseline_err > 0);

  auto wrong = out;
  wrong[5 * 16 + 3] = to_half_bits(from_half_bits(wrong[5 * 16 + 3], p.dtype()) + 0.25f, p.dtype());
  CHECK_FALSE(verify(p, wrong, &lse).ok);
  auto nan = out;
  nan.back() = 0xFFFF;  // the poison value of an unwritten element
  Verdict vn = verify(p, nan, &lse);
  CHECK_FALSE(vn.ok);
  CHECK(vn.nan_count == 1);
  auto bad_lse = lse;
  bad_lse[3] += 0.1f;
  CHECK_FALSE(verify(p, out, &bad_lse).ok);
}

TEST_CASE("reference: masks and scores go through the DSL interpreter", "[reference]") {
  // window(1, 0) on the tiny problem: query 1 sees keys 0 and 1; prefix(1): every query sees key 0 only.
  Problem p = tiny("prefix(1)");
  Rows r = attention_fp64(p, {{0, 0, 1}});
  for (int c = 0; c < 8; ++c) CHECK(r.o[c] == Approx(c + 1.0));
  CHECK(r.lse[0] == Approx(0.0).margin(1e-12));  // q1·k0 = 0
  // A score modifier that doubles the score: row 0's weights become e^4 : 1.
  Problem s = tiny("none");
  s.spec.score = "2.0 * score";
  Rows rs = attention_fp64(s, {{0, 0, 0}});
  const double w0 = std::exp(4.0) / (std::exp(4.0) + 1), w1 = 1 - w0;
  CHECK(rs.o[0] == Approx(w0 - w1).epsilon(1e-6));
  // Params take launch values over defaults; tensors are read by name.
  Problem t = tiny("kv < n");
  t.spec.params = {{"n", ScalarType::i32, 2}};
  t.params = {{"n", 1}};
  Rows rt = attention_fp64(t, {{0, 0, 1}});
  CHECK(rt.o[0] == Approx(1.0));
  Problem doc = tiny("document(d)");
  doc.spec.tensors = {{"d", ScalarType::i32, {"seq_kv"}}};
  doc.tensors = {{"d", {5, 6}, {}}};
  Rows rd = attention_fp64(doc, {{0, 0, 1}});
  CHECK(rd.o[0] == Approx(-1.0));  // query 1 is alone in document 6 with key 1
  CHECK(visible_fraction(doc) == Approx(0.5));
}

TEST_CASE("reference: large problems are checked on a spread of rows including both ends", "[reference]") {
  Problem p;
  p.batch = 2;
  p.heads_q = 3;
  p.seq_q = 5000;
  auto ids = pick_rows(p, 600);
  CHECK(ids.size() < size_t(p.batch * p.heads_q * p.seq_q));
  bool first = false, last = false;
  for (auto& r : ids) {
    first = first || (r.b == 1 && r.h == 2 && r.q == 0);
    last = last || (r.b == 1 && r.h == 2 && r.q == 4999);
  }
  CHECK(first);
  CHECK(last);
}

TEST_CASE("reference: packed sequences are each sequence's inputs end to end, judged one by one", "[reference][varlen]") {
  AttentionSpec spec;
  spec.dtype = DType::bf16;
  spec.head_dim_qk = spec.head_dim_v = 16;
  spec.mask = "causal_br";
  const std::vector<int64_t> q_len = {3, 0, 1, 5}, kv_len = {7, 2, 1, 5};
  const PackedSequences p = pack_sequences(spec, q_len, kv_len, 4, 2, {}, 9);
  REQUIRE(p.seqs.size() == 4);
  CHECK(p.cu_q == std::vector<int32_t>{0, 3, 3, 4, 9});
  CHECK(p.cu_kv == std::vector<int32_t>{0, 7, 9, 10, 15});
  CHECK(p.q.size() == size_t(9 * 4 * 16));
  CHECK(p.k.size() == size_t(15 * 2 * 16));
  // Sequence 3's keys are the packed keys from its offset on.
  CHECK(std::equal(p.seqs[3].k.begin(), p.seqs[3].k.end(), p.k.begin() + 10 * 2 * 16));
  CHECK(p.seqs[3].seq_q == 5);
  CHECK(p.seqs[3].seq_kv == 5);
  // The fp64 answer of each sequence, rounded and laid out packed ([heads_q, total] LSE), passes.
  std::vector<uint16_t> out(p.q.size());
  std::vector<float> lse(size_t(4 * 9));
  for (size_t b = 0; b < p.seqs.size(); ++b) {
    const Problem& s = p.seqs[b];
    std::vector<RowId> rows;
    for (int64_t i = 0; i < s.seq_q; ++i)
      for (int64_t h = 0; h < 4; ++h) rows.push_back({0, h, i});
    if (rows.empty()) continue;
    const Rows r = attention_fp64(s, rows);
    for (size_t j = 0; j < rows.size(); ++j) {
      const int64_t token = p.cu_q[b] + rows[j].q;
      for (int c = 0; c < 16; ++c)
        out[size_t((token * 4 + rows[j].h) * 16 + c)] = to_half_bits(float(r.o[j * 16 + size_t(c)]), DType::bf16);
      lse[size_t(rows[j].h * 9 + token)] = float(r.lse[j]);
    }
  }
  const Verdict good = verify_packed(p, out, lse);
  INFO(good.message);
  CHECK(good.ok);
  CHECK(good.message == "PASS");
  // One wrong element of sequence 3 fails it, by name; so does a NaN LSE of sequence 2.
  std::vector<uint16_t> bad = out;
  bad[size_t((7 * 4 + 1) * 16 + 3)] = to_half_bits(5.f, DType::bf16);
  const Verdict wrong = verify_packed(p, bad, lse);
  CHECK_FALSE(wrong.ok);
  CHECK_THAT(wrong.message, Catch::StartsWith("FAIL sequence 3 (5 x 5): FAIL"));
  std::vector<float> nan_lse = lse;
  nan_lse[size_t(2 * 9 + 3)] = NAN;
  CHECK_THAT(verify_packed(p, out, nan_lse).message, Catch::StartsWith("FAIL sequence 2 (1 x 1)"));
  CHECK_THROWS_WITH(pack_sequences(spec, {1}, {1, 2}, 4, 2, {}, 9), Catch::Contains("1 query lengths but 2 key lengths"));
}

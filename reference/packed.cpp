// Packed sequences for varlen checks: the inputs of each sequence and the per-sequence verdict.
#include <random>

#include "flashjit/reference.hpp"

namespace flashjit::ref {

namespace {

std::vector<int32_t> offsets(const std::vector<int64_t>& len, const char* side) {
  std::vector<int32_t> cu = {0};
  for (int64_t n : len) {
    if (n < 0 || cu.back() + n > INT32_MAX)
      throw Error(ErrorKind::usage, std::string("packed sequences: the ") + side + " tokens exceed 2^31-1");
    cu.push_back(int32_t(cu.back() + n));
  }
  return cu;
}

}  // namespace

PackedSequences pack_sequences(const AttentionSpec& spec, const std::vector<int64_t>& seq_q,
                               const std::vector<int64_t>& seq_kv, int64_t heads_q, int64_t heads_kv,
                               const std::vector<ParamValue>& params, uint64_t seed) {
  if (seq_q.size() != seq_kv.size())
    throw Error(ErrorKind::usage, "packed sequences: " + std::to_string(seq_q.size()) + " query lengths but " +
                                      std::to_string(seq_kv.size()) + " key lengths");
  PackedSequences out;
  out.cu_q = offsets(seq_q, "query");
  out.cu_kv = offsets(seq_kv, "key");
  const int64_t d_qk = spec.head_dim_qk, d_v = spec.head_dim_v;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (size_t b = 0; b < seq_q.size(); ++b) {
    Problem& p = out.seqs.emplace_back();
    p.spec = spec;
    p.batch = 1, p.seq_q = seq_q[b], p.seq_kv = seq_kv[b], p.heads_q = heads_q, p.heads_kv = heads_kv;
    p.params = params;
    auto fill = [&](std::vector<uint16_t>& mine, std::vector<uint16_t>& all, int64_t count) {
      for (int64_t i = 0; i < count; ++i) mine.push_back(to_half_bits(normal(rng), spec.dtype));
      all.insert(all.end(), mine.begin(), mine.end());
    };
    fill(p.q, out.q, p.seq_q * heads_q * d_qk);
    fill(p.k, out.k, p.seq_kv * heads_kv * d_qk);
    fill(p.v, out.v, p.seq_kv * heads_kv * d_v);
  }
  return out;
}

Verdict verify_packed(const PackedSequences& p, const std::vector<uint16_t>& out, const std::vector<float>& lse) {
  const int64_t total_q = p.cu_q.back();
  Verdict all;
  all.ok = true;
  all.message = "PASS";
  for (size_t b = 0; b < p.seqs.size(); ++b) {
    const Problem& s = p.seqs[b];
    if (s.seq_q == 0) continue;
    const size_t row = size_t(s.heads_q * s.d_v());
    std::vector<uint16_t> mine(out.begin() + ptrdiff_t(p.cu_q[b] * row), out.begin() + ptrdiff_t(p.cu_q[b + 1] * row));
    std::vector<float> mine_lse;  // [1, heads_q, seq_q] from [heads_q, total_q]
    for (int64_t h = 0; h < s.heads_q; ++h)
      for (int64_t i = 0; i < s.seq_q; ++i) mine_lse.push_back(lse[size_t(h * total_q + p.cu_q[b] + i)]);
    Verdict v = verify(s, mine, &mine_lse);
    if (!v.ok) {
      v.message = "FAIL sequence " + std::to_string(b) + " (" + std::to_string(s.seq_q) + " x " + std::to_string(s.seq_kv) +
                  "): " + v.message;
      return v;
    }
  }
  return all;
}

}  // namespace flashjit::ref

// Paged K/V caches (ForwardArgs::block_table) on the GPU against the fp64 reference: page sizes
// 16, 64 and 256 (one table lookup per page of a key tile) and 48 and 80 (one per copied row) over
// a shuffled block table, per-sequence key counts (seqused_kv) down to 0, decode and
// chunked-prefill query lengths, GQA (packed), split-KV given and automatic. Each sequence is
// checked as its own problem with its keys laid out contiguously.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>

#include "flashjit/reference.hpp"
#include "tests/gpu_case.hpp"
#include "tests/support.hpp"

using namespace flashjit;

namespace {

struct PagedCase {
  AttentionSpec spec;
  int64_t seq_q = 1;
  std::vector<int64_t> used;  // keys per sequence
  int64_t page_size = 16, heads_q = 8, heads_kv = 2;
  int num_splits = 0;
  bool pass_used = true;      // false: every sequence has max(used) keys (seqused_kv null)
};

ref::Verdict run_paged(const Runtime& rt, const PagedCase& c, uint64_t seed) {
  CompileOptions opts;
  opts.autotune = "off";
  Kernel kernel = rt.compile(c.spec, opts);
  const int64_t batch = int64_t(c.used.size()), d_qk = c.spec.head_dim_qk, d_v = c.spec.head_dim_v;
  const int64_t seq_kv = *std::max_element(c.used.begin(), c.used.end());
  const int64_t pages_per_seq = std::max<int64_t>(1, (seq_kv + c.page_size - 1) / c.page_size);
  const int64_t num_pages = batch * pages_per_seq + 3;  // spare pages nobody owns
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<int32_t> order(static_cast<size_t>(num_pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> table(static_cast<size_t>(batch * pages_per_seq));
  for (size_t i = 0; i < table.size(); ++i) table[i] = order[i];
  const int64_t row_k = c.heads_kv * d_qk, row_v = c.heads_kv * d_v;  // one key's elements
  std::vector<uint16_t> pool_k(size_t(num_pages * c.page_size * row_k), 0x7FFF),
      pool_v(size_t(num_pages * c.page_size * row_v), 0x7FFF);  // NaN where no sequence's key is
  std::vector<ref::Problem> seqs(static_cast<size_t>(batch));
  std::vector<uint16_t> q;
  for (int64_t b = 0; b < batch; ++b) {
    ref::Problem& p = seqs[size_t(b)];
    p.spec = c.spec;
    p.batch = 1, p.seq_q = c.seq_q, p.seq_kv = c.pass_used ? c.used[size_t(b)] : seq_kv;
    p.heads_q = c.heads_q, p.heads_kv = c.heads_kv;
    auto fill = [&](std::vector<uint16_t>& v, int64_t count) {
      for (int64_t i = 0; i < count; ++i) v.push_back(ref::to_half_bits(normal(rng), c.spec.dtype));
    };
    fill(p.q, c.seq_q * c.heads_q * d_qk);
    q.insert(q.end(), p.q.begin(), p.q.end());
    fill(p.k, p.seq_kv * row_k);
    fill(p.v, p.seq_kv * row_v);
    for (int64_t n = 0; n < p.seq_kv; ++n) {  // key n → row n % page_size of its page
      const int64_t page = table[size_t(b * pages_per_seq + n / c.page_size)], at = page * c.page_size + n % c.page_size;
      std::copy_n(p.k.begin() + n * row_k, row_k, pool_k.begin() + at * row_k);
      std::copy_n(p.v.begin() + n * row_v, row_v, pool_v.begin() + at * row_v);
    }
  }
  auto upload = [&](const void* data, size_t bytes) {
    DeviceBuffer buf = rt.alloc(bytes);
    if (bytes) buf.upload(data, bytes);
    return buf;
  };
  std::vector<int32_t> used32(c.used.begin(), c.used.end());
  DeviceBuffer dq = upload(q.data(), q.size() * 2), dk = upload(pool_k.data(), pool_k.size() * 2),
               dv = upload(pool_v.data(), pool_v.size() * 2), dtable = upload(table.data(), table.size() * 4),
               dused = upload(used32.data(), used32.size() * 4);
  DeviceBuffer o = rt.alloc(size_t(batch * c.seq_q * c.heads_q * d_v * 2)), lse = rt.alloc(size_t(batch * c.heads_q * c.seq_q * 4));
  o.fill_bytes(0xFF);
  lse.fill_bytes(0xFF);
  ForwardArgs a;
  a.batch = batch, a.seq_q = c.seq_q, a.seq_kv = seq_kv, a.heads_q = c.heads_q, a.heads_kv = c.heads_kv;
  a.q = bshd(dq.data(), c.seq_q, c.heads_q, d_qk);
  a.k = bshd(dk.data(), c.page_size, c.heads_kv, d_qk);  // [num_pages, page_size, heads_kv, d]: stride[0] = a page
  a.v = bshd(dv.data(), c.page_size, c.heads_kv, d_v);
  a.o = bshd(o.data(), c.seq_q, c.heads_q, d_v);
  a.lse = static_cast<float*>(lse.data());
  a.num_splits = c.num_splits;
  a.block_table = static_cast<const int32_t*>(dtable.data());
  a.page_size = c.page_size, a.max_pages_per_seq = pages_per_seq;
  if (c.pass_used) a.seqused_kv = static_cast<const int32_t*>(dused.data());
  kernel.forward(a);
  rt.synchronize();
  std::vector<uint16_t> out(size_t(batch * c.seq_q * c.heads_q * d_v));
  std::vector<float> lse_all(size_t(batch * c.heads_q * c.seq_q));
  o.download(out.data(), out.size() * 2);
  lse.download(lse_all.data(), lse_all.size() * 4);
  ref::Verdict all;
  all.ok = true;
  all.message = "PASS";
  const size_t o_seq = size_t(c.seq_q * c.heads_q * d_v), l_seq = size_t(c.heads_q * c.seq_q);
  for (int64_t b = 0; b < batch && all.ok; ++b) {
    std::vector<uint16_t> mine(out.begin() + b * o_seq, out.begin() + (b + 1) * o_seq);
    std::vector<float> mine_lse(lse_all.begin() + b * l_seq, lse_all.begin() + (b + 1) * l_seq);
    ref::Verdict v = ref::verify(seqs[size_t(b)], mine, &mine_lse);
    if (!v.ok) {
      all = v;
      all.message = "FAIL sequence " + std::to_string(b) + ": " + v.message;
    }
  }
  std::string used;
  for (size_t i = 0; i < c.used.size(); ++i) used += (i ? "," : "") + std::to_string(c.used[i]);
  std::printf("GPUCASE paged %s d=%d/%d mask=%s h=%lld/%lld sq=%lld used=%s%s page=%lld splits=%d %s\n",
              c.spec.dtype == DType::f16 ? "fp16" : "bf16", int(d_qk), int(d_v), c.spec.mask.c_str(), (long long)c.heads_q,
              (long long)c.heads_kv, (long long)c.seq_q, used.c_str(), c.pass_used ? "" : " (seqused null)",
              (long long)c.page_size, c.num_splits, all.message.c_str());
  std::fflush(stdout);
  return all;
}

}  // namespace

TEST_CASE("gpu paged: a shuffled block table of 16-, 48-, 64-, 80- and 256-key pages against fp64", "[gpu][paged]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  using test::make_spec;
  std::vector<PagedCase> cases;
  for (int64_t page : {16, 64, 256})
    for (int splits : {0, 1, 3}) cases.push_back({make_spec(DType::bf16, 128, 128, "causal_br"), 1, {1000, 17, 0, 4097}, page, 32, 8, splits});
  cases.push_back({make_spec(DType::f16, 64, 64, "causal_br"), 16, {300, 129, 2000}, 64, 8, 2, 0});       // chunked prefill
  cases.push_back({make_spec(DType::bf16, 128, 128, "none"), 4, {777, 33}, 16, 4, 4, 0, false});        // seqused null
  cases.push_back({make_spec(DType::bf16, 96, 96, "causal_br && kv >= q + seq_kv - seq_q - 200"), 2, {900, 5}, 32, 16, 2, 2});
  // A page size that neither divides a key tile nor is a multiple of one: the copies' generic
  // lookup (one per copied row) instead of one per page.
  cases.push_back({make_spec(DType::bf16, 128, 128, "causal_br"), 1, {1000, 17, 0, 4097}, 48, 32, 8, 0});
  cases.push_back({make_spec(DType::f16, 64, 64, "none"), 3, {500, 1}, 80, 8, 8, 2});
  for (const PagedCase& c : cases) {
    INFO(c.spec.canonical() << " page " << c.page_size << " splits " << c.num_splits);
    const ref::Verdict v = run_paged(rt, c, seed++);
    INFO(v.message);
    CHECK(v.ok);
  }
}

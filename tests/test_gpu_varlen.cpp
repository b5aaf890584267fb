// Varlen (ForwardArgs::cu_seqlens_*) on the GPU against the fp64 reference: sequences of different
// lengths packed without padding — lengths 0 and 1, a sequence of many tiles, decode batches with
// one query row each — under masks and a score, GQA (packed where it pays), split-KV given and
// automatic, mma.sync, and packed queries against a paged K/V cache (a shuffled block table, NaN in
// every pool row no sequence owns). Each sequence is checked as its own batch-1 problem, its LSE
// read from the [heads_q, total tokens] layout; outputs start as NaN, so a row nobody wrote fails.
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

struct Lengths {
  std::vector<int64_t> q, kv;
};

struct VarlenCase {
  AttentionSpec spec;
  Lengths len;
  int64_t heads_q = 2, heads_kv = 2;
  int num_splits = 0;
  std::optional<std::string> mma;
  std::vector<ParamValue> params;
  int64_t page_size = 0;  // > 0: K/V in a page pool through a shuffled block table
};

// The packed keys of each sequence moved into pages of a pool [num_pages, page_size, heads_kv, d]
// (rows no sequence owns are NaN) under a shuffled block table [batch, pages_per_seq].
struct PagePool {
  std::vector<uint16_t> k, v;
  std::vector<int32_t> table;
  int64_t pages_per_seq = 1;
};

PagePool page_pool(const ref::PackedSequences& p, int64_t page, int64_t heads_kv, int64_t d_qk, int64_t d_v, uint64_t seed) {
  const int64_t n = int64_t(p.cu_kv.size()) - 1;
  int64_t longest = 0;
  for (int64_t b = 0; b < n; ++b) longest = std::max<int64_t>(longest, p.cu_kv[size_t(b + 1)] - p.cu_kv[size_t(b)]);
  PagePool pool;
  pool.pages_per_seq = std::max<int64_t>(1, (longest + page - 1) / page);
  const int64_t pages = n * pool.pages_per_seq + 2;  // two spare pages nobody owns
  std::vector<int32_t> order(static_cast<size_t>(pages));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  pool.table.assign(order.begin(), order.begin() + n * pool.pages_per_seq);
  const int64_t row_k = heads_kv * d_qk, row_v = heads_kv * d_v;
  pool.k.assign(size_t(pages * page * row_k), 0x7FFF);
  pool.v.assign(size_t(pages * page * row_v), 0x7FFF);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < p.cu_kv[size_t(b + 1)] - p.cu_kv[size_t(b)]; ++j) {
      const int64_t at = pool.table[size_t(b * pool.pages_per_seq + j / page)] * page + j % page, from = p.cu_kv[size_t(b)] + j;
      std::copy_n(p.k.begin() + from * row_k, row_k, pool.k.begin() + at * row_k);
      std::copy_n(p.v.begin() + from * row_v, row_v, pool.v.begin() + at * row_v);
    }
  return pool;
}

ref::Verdict run_varlen(const Runtime& rt, const VarlenCase& c, uint64_t seed) {
  CompileOptions opts;
  opts.mma = c.mma;
  opts.autotune = "off";
  Kernel kernel = rt.compile(c.spec, opts);
  const int64_t d_qk = c.spec.head_dim_qk, d_v = c.spec.head_dim_v, n = int64_t(c.len.q.size());
  const ref::PackedSequences packed = ref::pack_sequences(c.spec, c.len.q, c.len.kv, c.heads_q, c.heads_kv, c.params, seed);
  const int64_t total_q = packed.cu_q.back(), total_kv = packed.cu_kv.back();
  auto upload = [&](const void* data, size_t bytes) {
    DeviceBuffer buf = rt.alloc(bytes);
    if (bytes) buf.upload(data, bytes);
    return buf;
  };
  const PagePool pool = c.page_size ? page_pool(packed, c.page_size, c.heads_kv, d_qk, d_v, seed) : PagePool{};
  const std::vector<uint16_t>& keys = c.page_size ? pool.k : packed.k;
  const std::vector<uint16_t>& values = c.page_size ? pool.v : packed.v;
  DeviceBuffer dq = upload(packed.q.data(), packed.q.size() * 2), dk = upload(keys.data(), keys.size() * 2),
               dv = upload(values.data(), values.size() * 2), dtable = upload(pool.table.data(), pool.table.size() * 4);
  DeviceBuffer dcu_q = upload(packed.cu_q.data(), packed.cu_q.size() * 4),
               dcu_kv = upload(packed.cu_kv.data(), packed.cu_kv.size() * 4);
  DeviceBuffer o = rt.alloc(size_t(total_q * c.heads_q * d_v * 2)), lse = rt.alloc(size_t(c.heads_q * total_q * 4));
  o.fill_bytes(0xFF);
  lse.fill_bytes(0xFF);
  ForwardArgs a;
  a.batch = n, a.seq_q = total_q, a.seq_kv = total_kv, a.heads_q = c.heads_q, a.heads_kv = c.heads_kv;
  a.q = bshd(dq.data(), total_q, c.heads_q, d_qk);
  a.k = bshd(dk.data(), total_kv, c.heads_kv, d_qk);
  a.v = bshd(dv.data(), total_kv, c.heads_kv, d_v);
  a.o = bshd(o.data(), total_q, c.heads_q, d_v);
  a.lse = static_cast<float*>(lse.data());
  a.params = c.params;
  a.num_splits = c.num_splits;
  a.cu_seqlens_q = static_cast<const int32_t*>(dcu_q.data());
  a.cu_seqlens_kv = static_cast<const int32_t*>(dcu_kv.data());
  a.max_seqlen_q = *std::max_element(c.len.q.begin(), c.len.q.end());
  a.max_seqlen_kv = *std::max_element(c.len.kv.begin(), c.len.kv.end());
  if (c.page_size) {  // k, v: the pools, stride[0] a page; seq_kv: the most keys a sequence has
    a.k = bshd(dk.data(), c.page_size, c.heads_kv, d_qk);
    a.v = bshd(dv.data(), c.page_size, c.heads_kv, d_v);
    a.seq_kv = a.max_seqlen_kv;
    a.block_table = static_cast<const int32_t*>(dtable.data());
    a.page_size = c.page_size, a.max_pages_per_seq = pool.pages_per_seq;
  }
  kernel.forward(a);
  rt.synchronize();
  std::vector<uint16_t> out(size_t(total_q * c.heads_q * d_v));
  std::vector<float> lse_all(size_t(c.heads_q * total_q));
  if (!out.empty()) o.download(out.data(), out.size() * 2);
  if (!lse_all.empty()) lse.download(lse_all.data(), lse_all.size() * 4);
  const ref::Verdict all = ref::verify_packed(packed, out, lse_all);
  std::string lengths;
  for (size_t i = 0; i < c.len.q.size(); ++i) lengths += (i ? "," : "") + std::to_string(c.len.q[i]) + "/" + std::to_string(c.len.kv[i]);
  std::printf("GPUCASE varlen %s d=%d/%d mask=%s score=%s h=%lld/%lld lengths=%s splits=%d%s%s %s\n",
              c.spec.dtype == DType::f16 ? "fp16" : "bf16", int(d_qk), int(d_v), c.spec.mask.c_str(), c.spec.score.c_str(),
              (long long)c.heads_q, (long long)c.heads_kv, lengths.c_str(), c.num_splits, c.mma ? " mma=sync" : "",
              c.page_size ? (" page=" + std::to_string(c.page_size)).c_str() : "", all.message.c_str());
  std::fflush(stdout);
  return all;
}

}  // namespace

TEST_CASE("gpu varlen: packed sequences against the fp64 reference, one by one", "[gpu][varlen]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  using test::make_spec;
  const Lengths prefill{{0, 1, 17, 300, 129}, {5, 1, 17, 500, 129}};
  const Lengths decode{{1, 1, 1, 1, 1}, {1, 1000, 4096, 33, 0}};
  const Lengths speculative{{4, 2, 16}, {4, 3000, 16}};
  std::vector<VarlenCase> cases;
  for (const char* mask : {"none", "causal", "causal_br"})
    for (int splits : {1, 0, 3}) cases.push_back({make_spec(DType::bf16, 128, 128, mask), prefill, 4, 2, splits});
  cases.push_back({make_spec(DType::f16, 64, 64, "causal_br"), decode, 32, 4, 0});                 // packed + split
  cases.push_back({make_spec(DType::bf16, 128, 128, "causal_br"), decode, 8, 8, 0});               // split, no GQA
  cases.push_back({make_spec(DType::bf16, 128, 128, "causal_br"), speculative, 16, 2, 0});
  cases.push_back({make_spec(DType::bf16, 64, 128, "causal_br && kv >= q + seq_kv - seq_q - 100"), prefill, 2, 1, 0});
  AttentionSpec cap = make_spec(DType::f16, 96, 96, "causal", "softcap * tanh(score / softcap)");
  cap.params = {{"softcap", ScalarType::f32, 30}};
  cases.push_back({cap, prefill, 4, 4, 0});
  cases.push_back({make_spec(DType::bf16, 128, 128, "causal"), prefill, 4, 1, 0, std::string("sync")});
  // Packed queries against a paged cache (chunked prefill and decode in one batch, as vLLM runs
  // them): pages that divide a key tile, a multiple of one, and neither.
  const Lengths mixed{{0, 1, 17, 300, 1, 4}, {5, 1000, 17, 500, 4097, 0}};
  cases.push_back({make_spec(DType::bf16, 128, 128, "causal_br"), mixed, 8, 2, 0, {}, {}, 16});
  cases.push_back({make_spec(DType::bf16, 128, 128, "causal_br"), decode, 32, 8, 0, {}, {}, 256});
  cases.push_back({make_spec(DType::f16, 64, 64, "causal_br && kv >= q + seq_kv - seq_q - 200"), mixed, 4, 4, 3, {}, {}, 48});
  for (const VarlenCase& c : cases) {
    INFO(c.spec.canonical() << " splits " << c.num_splits);
    const ref::Verdict v = run_varlen(rt, c, seed++);
    INFO(v.message);
    CHECK(v.ok);
  }
}

// Varlen (ForwardArgs::cu_seqlens_*) on the GPU against the fp64 reference: sequences of different
// lengths packed without padding — lengths 0 and 1, a sequence of many tiles, decode batches with
// one query row each — under masks and a score, GQA (packed where it pays), split-KV given and
// automatic, and mma.sync. Each sequence is checked as its own batch-1 problem, its LSE read from
// the [heads_q, total tokens] layout; outputs start as NaN, so a row nobody wrote fails.
#include <catch2/catch.hpp>

#include <cstdio>
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
};

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
  DeviceBuffer dq = upload(packed.q.data(), packed.q.size() * 2), dk = upload(packed.k.data(), packed.k.size() * 2),
               dv = upload(packed.v.data(), packed.v.size() * 2);
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
  kernel.forward(a);
  rt.synchronize();
  std::vector<uint16_t> out(size_t(total_q * c.heads_q * d_v));
  std::vector<float> lse_all(size_t(c.heads_q * total_q));
  if (!out.empty()) o.download(out.data(), out.size() * 2);
  if (!lse_all.empty()) lse.download(lse_all.data(), lse_all.size() * 4);
  const ref::Verdict all = ref::verify_packed(packed, out, lse_all);
  std::string lengths;
  for (size_t i = 0; i < c.len.q.size(); ++i) lengths += (i ? "," : "") + std::to_string(c.len.q[i]) + "/" + std::to_string(c.len.kv[i]);
  std::printf("GPUCASE varlen %s d=%d/%d mask=%s score=%s h=%lld/%lld lengths=%s splits=%d%s %s\n",
              c.spec.dtype == DType::f16 ? "fp16" : "bf16", int(d_qk), int(d_v), c.spec.mask.c_str(), c.spec.score.c_str(),
              (long long)c.heads_q, (long long)c.heads_kv, lengths.c_str(), c.num_splits, c.mma ? " mma=sync" : "",
              all.message.c_str());
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
  for (const VarlenCase& c : cases) {
    INFO(c.spec.canonical() << " splits " << c.num_splits);
    const ref::Verdict v = run_varlen(rt, c, seed++);
    INFO(v.message);
    CHECK(v.ok);
  }
}

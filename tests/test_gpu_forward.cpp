// The forward kernel on the GPU against the fp64 reference (DESIGN §8 numerics rule): fresh
// random inputs, NaN-poisoned outputs, odd shapes, GQA, BHSD strides, fully masked rows.
#include <catch2/catch.hpp>

#include <cstdio>
#include <random>

#include "flashjit/reference.hpp"
#include "tests/support.hpp"

using namespace flashjit;

namespace {

struct Case {
  DType dtype = DType::bf16;
  int d = 64, dv = 0;
  std::string mask = "none";
  int64_t seq_q = 128, seq_kv = 128, batch = 1, heads_q = 2, heads_kv = 2;
  bool bhsd = false;  // [batch, heads, seq, dim] memory, passed through strides
  std::optional<TileConfig> config;
};

// Strides (elements) of [b, s, h, d] for a tensor stored BSHD or BHSD.
Tensor view(void* data, const Case& c, int64_t seq, int64_t heads, int64_t dim) {
  if (!c.bhsd) return bshd(data, seq, heads, dim);
  Tensor t;
  t.data = data;
  t.stride[0] = heads * seq * dim;
  t.stride[1] = dim;
  t.stride[2] = seq * dim;
  t.stride[3] = 1;
  return t;
}

// Host BSHD → the device layout of `view`.
std::vector<uint16_t> to_layout(const std::vector<uint16_t>& bshd_data, const Case& c, int64_t seq, int64_t heads,
                                int64_t dim) {
  if (!c.bhsd) return bshd_data;
  std::vector<uint16_t> out(bshd_data.size());
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t s = 0; s < seq; ++s)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t x = 0; x < dim; ++x)
          out[((b * heads + h) * seq + s) * dim + x] = bshd_data[((b * seq + s) * heads + h) * dim + x];
  return out;
}

std::vector<uint16_t> from_layout(const std::vector<uint16_t>& dev, const Case& c, int64_t seq, int64_t heads,
                                  int64_t dim) {
  if (!c.bhsd) return dev;
  std::vector<uint16_t> out(dev.size());
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t s = 0; s < seq; ++s)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t x = 0; x < dim; ++x)
          out[((b * seq + s) * heads + h) * dim + x] = dev[((b * heads + h) * seq + s) * dim + x];
  return out;
}

ref::Verdict run_case(const Runtime& rt, const Case& c, uint64_t seed) {
  AttentionSpec spec;
  spec.dtype = c.dtype;
  spec.head_dim_qk = c.d;
  spec.head_dim_v = c.dv ? c.dv : c.d;
  spec.mask = c.mask;
  CompileOptions opts;
  opts.config = c.config;
  Kernel kernel = rt.compile(spec, opts);

  ref::Problem p;
  p.dtype = c.dtype;
  p.mask = c.mask;
  p.batch = c.batch;
  p.seq_q = c.seq_q;
  p.seq_kv = c.seq_kv;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.d_qk = spec.head_dim_qk;
  p.d_v = spec.head_dim_v;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  auto fill = [&](std::vector<uint16_t>& v, size_t count) {
    v.resize(count);
    for (auto& x : v) x = ref::to_half_bits(n(rng), c.dtype);
  };
  fill(p.q, c.batch * c.seq_q * c.heads_q * p.d_qk);
  fill(p.k, c.batch * c.seq_kv * c.heads_kv * p.d_qk);
  fill(p.v, c.batch * c.seq_kv * c.heads_kv * p.d_v);
  const size_t o_elems = c.batch * c.seq_q * c.heads_q * p.d_v;
  DeviceBuffer q = rt.alloc(p.q.size() * 2), k = rt.alloc(p.k.size() * 2), v = rt.alloc(p.v.size() * 2);
  DeviceBuffer o = rt.alloc(o_elems * 2), lse = rt.alloc(c.batch * c.heads_q * c.seq_q * 4);
  auto up = [](DeviceBuffer& buf, const std::vector<uint16_t>& h) { buf.upload(h.data(), h.size() * 2); };
  up(q, to_layout(p.q, c, c.seq_q, c.heads_q, p.d_qk));
  up(k, to_layout(p.k, c, c.seq_kv, c.heads_kv, p.d_qk));
  up(v, to_layout(p.v, c, c.seq_kv, c.heads_kv, p.d_v));
  o.fill_bytes(0xFF);  // NaN in fp16/bf16/fp32: any element the kernel does not write fails
  lse.fill_bytes(0xFF);
  ForwardArgs a;
  a.batch = c.batch;
  a.seq_q = c.seq_q;
  a.seq_kv = c.seq_kv;
  a.heads_q = c.heads_q;
  a.heads_kv = c.heads_kv;
  a.q = view(q.data(), c, c.seq_q, c.heads_q, p.d_qk);
  a.k = view(k.data(), c, c.seq_kv, c.heads_kv, p.d_qk);
  a.v = view(v.data(), c, c.seq_kv, c.heads_kv, p.d_v);
  a.o = view(o.data(), c, c.seq_q, c.heads_q, p.d_v);
  a.lse = static_cast<float*>(lse.data());
  kernel.forward(a);
  rt.synchronize();
  std::vector<uint16_t> out(o_elems);
  std::vector<float> lse_host(c.batch * c.heads_q * c.seq_q);
  o.download(out.data(), out.size() * 2);
  lse.download(lse_host.data(), lse_host.size() * 4);
  ref::Verdict verdict = ref::verify(p, from_layout(out, c, c.seq_q, c.heads_q, p.d_v), &lse_host);
  // One line per case on stdout: scripts/gpu_check.sh collects these into its table.
  std::printf("GPUCASE %s d=%d/%d mask=%s b=%lld h=%lld/%lld sq=%lld skv=%lld %s %s %s\n",
              c.dtype == DType::f16 ? "fp16" : "bf16", int(p.d_qk), int(p.d_v), c.mask.c_str(), (long long)c.batch,
              (long long)c.heads_q, (long long)c.heads_kv, (long long)c.seq_q, (long long)c.seq_kv,
              c.bhsd ? "bhsd" : "bshd", kernel.compiled().config.str().c_str(), verdict.message.c_str());
  std::fflush(stdout);
  return verdict;
}

void run_matrix(DType dt, int d, const std::string& mask) {
  Runtime rt = Runtime::create(0);
  const std::pair<int64_t, int64_t> shapes[] = {{128, 128}, {1000, 1000}, {113, 203}, {4096, 4096}};
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  for (auto [sq, skv] : shapes) {
    Case c;
    c.dtype = dt;
    c.d = d;
    c.mask = mask;
    c.seq_q = sq;
    c.seq_kv = skv;
    c.batch = sq >= 4096 ? 1 : 2;
    ref::Verdict v = run_case(rt, c, seed++);
    INFO("sq=" << sq << " skv=" << skv << ": " << v.message);
    CHECK(v.ok);
  }
}

}  // namespace

TEST_CASE("gpu forward: fp16 d=64 none", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::f16, 64, "none"); }
TEST_CASE("gpu forward: fp16 d=64 causal", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::f16, 64, "causal"); }
TEST_CASE("gpu forward: fp16 d=128 none", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::f16, 128, "none"); }
TEST_CASE("gpu forward: fp16 d=128 causal", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::f16, 128, "causal"); }
TEST_CASE("gpu forward: bf16 d=64 none", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::bf16, 64, "none"); }
TEST_CASE("gpu forward: bf16 d=64 causal", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::bf16, 64, "causal"); }
TEST_CASE("gpu forward: bf16 d=128 none", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::bf16, 128, "none"); }
TEST_CASE("gpu forward: bf16 d=128 causal", "[gpu][forward]") { REQUIRE_GPU_OR_SKIP(); run_matrix(DType::bf16, 128, "causal"); }

TEST_CASE("gpu forward: odd head dims and d_qk != d_v and GQA/MQA and BHSD strides", "[gpu][forward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  std::vector<Case> cases;
  for (int d : {72, 80, 96, 160, 256}) cases.push_back({DType::bf16, d, 0, "causal", 203, 113, 2, 2, 2});
  cases.push_back({DType::f16, 192, 128, "none", 113, 203, 1, 2, 2});             // d_qk != d_v
  cases.push_back({DType::bf16, 128, 0, "causal", 257, 257, 2, 8, 1});            // GQA 8:1
  cases.push_back({DType::f16, 64, 0, "none", 1023, 1024, 1, 4, 1});              // MQA
  cases.push_back({DType::bf16, 64, 0, "causal", 300, 333, 2, 4, 2, /*bhsd=*/true});
  cases.push_back({DType::f16, 128, 0, "none", 1, 4096, 3, 2, 2});                 // decode-like
  for (const Case& c : cases) {
    ref::Verdict v = run_case(rt, c, seed++);
    INFO("d=" << c.d << " dv=" << c.dv << " " << v.message);
    CHECK(v.ok);
  }
}

TEST_CASE("gpu forward: over 48 KB of shared memory (opt-in attribute) and non-default tiles", "[gpu][forward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  Case c;
  c.d = 256;
  c.mask = "causal";
  c.seq_q = c.seq_kv = 333;
  c.config = TileConfig{64, 64, 4, 3};  // Q 32 KB + 3 stages × 64 KB of K/V: 224 KB
  ref::Verdict v = run_case(rt, c, 11);
  INFO(v.message);
  CHECK(v.ok);
  Case small;
  small.dtype = DType::f16;
  small.d = 64;
  small.seq_q = 77;
  small.seq_kv = 301;
  small.config = TileConfig{16, 32, 1, 1};  // one warp, no pipelining
  ref::Verdict w = run_case(rt, small, 12);
  INFO(w.message);
  CHECK(w.ok);
  Case wide;
  wide.dtype = DType::bf16;
  wide.d = 128;
  wide.mask = "causal";
  wide.seq_q = 1000;
  wide.seq_kv = 1000;
  wide.config = TileConfig{128, 128, 8, 2};  // 8 warps, 128-key tiles
  ref::Verdict x = run_case(rt, wide, 14);
  INFO(x.message);
  CHECK(x.ok);
}

TEST_CASE("gpu forward: rows with no visible key give O = 0 and LSE = -inf and never NaN", "[gpu][forward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  Case c;
  c.mask = "causal";
  c.seq_q = 70;
  c.seq_kv = 0;  // every row fully masked
  ref::Verdict v = run_case(rt, c, 13);
  INFO(v.message);
  CHECK(v.ok);
  CHECK(v.nan_count == 0);
}

#include "tests/gpu_case.hpp"

#include <array>
#include <cstdio>
#include <random>

namespace flashjit::test {

namespace {

bool padded(const Case& c) { return c.pad_head || c.pad_seq; }

// Strides (elements) of [b, s, h, d] for a tensor stored BSHD or BHSD, padded as the case says.
std::array<int64_t, 4> strides(const Case& c, int64_t seq, int64_t heads, int64_t dim) {
  if (c.bhsd) {
    const int64_t s = dim + c.pad_seq, h = seq * s + c.pad_head;
    return {heads * h, s, h, 1};
  }
  const int64_t h = dim + c.pad_head, s = heads * h + c.pad_seq;
  return {seq * s, s, h, 1};
}

}  // namespace

Tensor view(void* data, const Case& c, int64_t seq, int64_t heads, int64_t dim) {
  Tensor t;
  t.data = data;
  const auto st = strides(c, seq, heads, dim);
  for (int i = 0; i < 4; ++i) t.stride[i] = st[i];
  return t;
}

std::string layout(const Case& c) {
  std::string s = c.bhsd ? "bhsd" : "bshd";
  if (padded(c)) s += "+pad" + std::to_string(c.pad_head) + "/" + std::to_string(c.pad_seq);
  if (c.mma) s += " mma=" + *c.mma;
  if (c.tiered) s += " tiered=" + *c.tiered;
  if (c.num_splits) s += " splits=" + std::to_string(c.num_splits);
  return s;
}

size_t device_elems(const Case& c, int64_t seq, int64_t heads, int64_t dim) {
  return size_t(c.batch * strides(c, seq, heads, dim)[0]);
}

std::vector<uint16_t> relayout(const std::vector<uint16_t>& in, const Case& c, int64_t seq, int64_t heads, int64_t dim,
                               bool to_device) {
  if (!c.bhsd && !padded(c)) return in;
  const auto st = strides(c, seq, heads, dim);
  std::vector<uint16_t> out(to_device ? device_elems(c, seq, heads, dim) : size_t(c.batch * seq * heads * dim),
                            to_device ? 0xFFFF : 0);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t s = 0; s < seq; ++s)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t x = 0; x < dim; ++x) {
          const size_t bshd_i = ((b * seq + s) * heads + h) * dim + x;
          const size_t dev_i = b * st[0] + s * st[1] + h * st[2] + x;
          if (to_device) out[dev_i] = in[bshd_i];
          else out[bshd_i] = in[dev_i];
        }
  return out;
}

size_t written_padding(const std::vector<uint16_t>& device, const Case& c, int64_t seq, int64_t heads, int64_t dim) {
  if (!padded(c)) return 0;
  std::vector<uint16_t> zeros(size_t(c.batch * seq * heads * dim), 0);
  const std::vector<uint16_t> holes = relayout(zeros, c, seq, heads, dim, true);  // 0 in the data, NaN in padding
  size_t n = 0;
  for (size_t i = 0; i < device.size(); ++i) n += holes[i] == 0xFFFF && device[i] != 0xFFFF;
  return n;
}

Tensor bhsd(void* data, int64_t seq, int64_t heads, int64_t dim) {
  Tensor t;
  t.data = data;
  t.stride[0] = heads * seq * dim;
  t.stride[1] = dim;
  t.stride[2] = seq * dim;
  t.stride[3] = 1;
  return t;
}

AttentionSpec make_spec(DType dt, int d_qk, int d_v, const std::string& mask, const std::string& score) {
  AttentionSpec s;
  s.dtype = dt;
  s.head_dim_qk = d_qk;
  s.head_dim_v = d_v ? d_v : d_qk;
  s.mask = mask;
  s.score = score;
  return s;
}

std::unique_ptr<DeviceProblem> upload_problem(const Runtime& rt, const Case& c, uint64_t seed) {
  auto dp = std::make_unique<DeviceProblem>();
  ref::Problem& p = dp->p;
  p.spec = c.spec;
  static_cast<ProblemShape&>(p) = c;
  p.params = c.params;
  p.scale = c.scale;
  const int64_t d_qk = p.d_qk(), d_v = p.d_v();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  auto fill = [&](std::vector<uint16_t>& v, size_t count) {
    v.resize(count);
    for (auto& x : v) x = ref::to_half_bits(n(rng), p.dtype());
  };
  fill(p.q, c.batch * c.seq_q * c.heads_q * d_qk);
  fill(p.k, c.batch * c.seq_kv * c.heads_kv * d_qk);
  fill(p.v, c.batch * c.seq_kv * c.heads_kv * d_v);
  ref::fill_spec_tensors(p, rng());

  dp->q = rt.alloc(device_elems(c, c.seq_q, c.heads_q, d_qk) * 2);
  dp->k = rt.alloc(device_elems(c, c.seq_kv, c.heads_kv, d_qk) * 2);
  dp->v = rt.alloc(device_elems(c, c.seq_kv, c.heads_kv, d_v) * 2);
  dp->o = rt.alloc(device_elems(c, c.seq_q, c.heads_q, d_v) * 2), dp->lse = rt.alloc(c.batch * c.heads_q * c.seq_q * 4);
  auto up = [](DeviceBuffer& buf, const std::vector<uint16_t>& h) { buf.upload(h.data(), h.size() * 2); };
  up(dp->q, relayout(p.q, c, c.seq_q, c.heads_q, d_qk, true));
  up(dp->k, relayout(p.k, c, c.seq_kv, c.heads_kv, d_qk, true));
  up(dp->v, relayout(p.v, c, c.seq_kv, c.heads_kv, d_v, true));
  dp->o.fill_bytes(0xFF);  // NaN in fp16/bf16/fp32: any element the kernel does not write fails
  dp->lse.fill_bytes(0xFF);
  ForwardArgs& a = dp->args;
  for (const ref::HostTensor& t : p.tensors) {
    const bool i32 = !t.i32.empty();
    const size_t count = i32 ? t.i32.size() : t.f32.size();
    dp->tensors.push_back(rt.alloc(count * 4));
    dp->tensors.back().upload(i32 ? static_cast<const void*>(t.i32.data()) : t.f32.data(), count * 4);
    a.buffers.push_back({t.name, dp->tensors.back().data(), int64_t(count)});
  }
  static_cast<ProblemShape&>(a) = c;
  a.q = view(dp->q.data(), c, c.seq_q, c.heads_q, d_qk);
  a.k = view(dp->k.data(), c, c.seq_kv, c.heads_kv, d_qk);
  a.v = view(dp->v.data(), c, c.seq_kv, c.heads_kv, d_v);
  a.o = view(dp->o.data(), c, c.seq_q, c.heads_q, d_v);
  a.lse = static_cast<float*>(dp->lse.data());
  a.params = c.params;
  a.scale = c.scale;
  a.num_splits = c.num_splits;
  return dp;
}

ref::Verdict run_case(const Runtime& rt, const Case& c, uint64_t seed) {
  CompileOptions opts;
  opts.config = c.config;
  opts.mma = c.mma;
  opts.tiered = c.tiered;
  opts.autotune = "off";  // the numerics of this config (or the heuristic's), not of a tuning run
  Kernel kernel = rt.compile(c.spec, opts);
  std::unique_ptr<DeviceProblem> dp = upload_problem(rt, c, seed);
  const ref::Problem& p = dp->p;
  const int64_t d_qk = p.d_qk(), d_v = p.d_v();
  const size_t o_elems = device_elems(c, c.seq_q, c.heads_q, d_v);
  DeviceBuffer &o = dp->o, &lse = dp->lse;
  const ForwardArgs& a = dp->args;
  kernel.forward(a);
  rt.synchronize();
  std::vector<uint16_t> out(o_elems);
  std::vector<float> lse_host(c.batch * c.heads_q * c.seq_q);
  o.download(out.data(), out.size() * 2);
  lse.download(lse_host.data(), lse_host.size() * 4);
  ref::Verdict verdict = ref::verify(p, relayout(out, c, c.seq_q, c.heads_q, d_v, false), &lse_host);
  if (size_t w = written_padding(out, c, c.seq_q, c.heads_q, d_v)) {
    verdict.ok = false;
    verdict.message = "FAIL " + std::to_string(w) + " elements of O's padding written; verdict " + verdict.message;
  }
  std::printf("GPUCASE %s d=%d/%d mask=%s score=%s b=%lld h=%lld/%lld sq=%lld skv=%lld %s %s %s\n",
              p.dtype() == DType::f16 ? "fp16" : "bf16", int(d_qk), int(d_v), c.spec.mask.c_str(), c.spec.score.c_str(),
              (long long)c.batch, (long long)c.heads_q, (long long)c.heads_kv, (long long)c.seq_q, (long long)c.seq_kv,
              layout(c).c_str(), kernel.compiled().config.str().c_str(), verdict.message.c_str());
  std::fflush(stdout);
  return verdict;
}

}  // namespace flashjit::test

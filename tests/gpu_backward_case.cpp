// One backward run on the GPU against the fp64 reference backward: the forward's O and LSE from the
// kernel, random dO, NaN-poisoned dQ, dK, dV (any element not written fails).
#include <cstdio>
#include <cstring>
#include <random>

#include "tests/gpu_case.hpp"

namespace flashjit::test {

BackwardResult run_backward_case(const Runtime& rt, const Case& c, uint64_t seed, int repeats, bool deterministic) {
  CompileOptions opts;
  opts.config = c.config;
  opts.backward_config = c.backward_config;
  opts.autotune = "off";
  opts.backward = true;
  opts.mma = c.mma;
  Kernel kernel = rt.compile(c.spec, opts);
  std::unique_ptr<DeviceProblem> dp = upload_problem(rt, c, seed);
  const ref::Problem& p = dp->p;
  const int64_t d_qk = p.d_qk(), d_v = p.d_v();
  kernel.forward(dp->args);

  std::mt19937_64 rng(seed ^ 0x9E3779B97F4A7C15ull);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<uint16_t> d_o(size_t(c.batch * c.seq_q * c.heads_q * d_v));
  for (auto& x : d_o) x = ref::to_half_bits(n(rng), p.dtype());
  DeviceBuffer d_o_dev = rt.alloc(device_elems(c, c.seq_q, c.heads_q, d_v) * 2);
  std::vector<uint16_t> d_o_dev_layout = relayout(d_o, c, c.seq_q, c.heads_q, d_v, true);
  d_o_dev.upload(d_o_dev_layout.data(), d_o_dev_layout.size() * 2);
  const size_t nq = device_elems(c, c.seq_q, c.heads_q, d_qk), nk = device_elems(c, c.seq_kv, c.heads_kv, d_qk),
               nv = device_elems(c, c.seq_kv, c.heads_kv, d_v);
  DeviceBuffer dq = rt.alloc(nq * 2), dk = rt.alloc(nk * 2), dv = rt.alloc(nv * 2);

  BackwardArgs b;
  static_cast<ProblemShape&>(b) = c;
  b.q = dp->args.q;
  b.k = dp->args.k;
  b.v = dp->args.v;
  b.o = dp->args.o;
  b.d_o = view(d_o_dev.data(), c, c.seq_q, c.heads_q, d_v);
  b.dq = view(dq.data(), c, c.seq_q, c.heads_q, d_qk);
  b.dk = view(dk.data(), c, c.seq_kv, c.heads_kv, d_qk);
  b.dv = view(dv.data(), c, c.seq_kv, c.heads_kv, d_v);
  b.lse = dp->args.lse;
  b.scale = c.scale;
  b.params = c.params;
  b.buffers = dp->args.buffers;
  b.deterministic = deterministic || repeats > 0;
  BlockMap map;
  if (c.backward_map) {
    map = kernel.build_backward_block_map(b);
    b.block_map = &map;
  }

  struct Grads {
    std::vector<uint16_t> dq, dk, dv;
  };
  auto run = [&] {
    for (DeviceBuffer* g : {&dq, &dk, &dv}) g->fill_bytes(0xFF);
    kernel.backward(b);
    rt.synchronize();
    Grads g{std::vector<uint16_t>(nq), std::vector<uint16_t>(nk), std::vector<uint16_t>(nv)};
    dq.download(g.dq.data(), g.dq.size() * 2);
    dk.download(g.dk.data(), g.dk.size() * 2);
    dv.download(g.dv.data(), g.dv.size() * 2);
    return g;
  };
  const Grads first = run();
  BackwardResult r;
  for (int i = 0; i < repeats && r.deterministic; ++i) {
    const Grads again = run();
    r.deterministic = again.dq == first.dq && again.dk == first.dk && again.dv == first.dv;
  }
  ref::BackwardVerdict v =
      ref::verify_backward(p, d_o, relayout(first.dq, c, c.seq_q, c.heads_q, d_qk, false),
                           relayout(first.dk, c, c.seq_kv, c.heads_kv, d_qk, false),
                           relayout(first.dv, c, c.seq_kv, c.heads_kv, d_v, false));
  const size_t padding_written = written_padding(first.dq, c, c.seq_q, c.heads_q, d_qk) +
                                 written_padding(first.dk, c, c.seq_kv, c.heads_kv, d_qk) +
                                 written_padding(first.dv, c, c.seq_kv, c.heads_kv, d_v);
  r.ok = v.ok && r.deterministic && padding_written == 0;
  r.message = (padding_written ? std::to_string(padding_written) + " gradient padding elements written; " : std::string()) +
              v.message + (repeats ? (r.deterministic ? "; bitwise equal over " : "; NOT bitwise equal within ") +
                                         std::to_string(repeats + 1) + " runs"
                                   : "");
  const CompiledKernel& ck = kernel.backward_compiled(c, b.deterministic);  // the module this call ran
  const bool fused = !b.deterministic && ck.description.find("dQ fused") != std::string::npos;
  std::printf("GPUCASE backward %s d=%d/%d mask=%s score=%s b=%lld h=%lld/%lld sq=%lld skv=%lld %s%s %s dq=%s %s %s\n",
              p.dtype() == DType::f16 ? "fp16" : "bf16", int(d_qk), int(d_v), c.spec.mask.c_str(), c.spec.score.c_str(),
              (long long)c.batch, (long long)c.heads_q, (long long)c.heads_kv, (long long)c.seq_q, (long long)c.seq_kv,
              layout(c).c_str(), c.backward_map ? " map=built-once" : "", ck.config.str().c_str(), fused ? "fused" : "kernel", r.ok ? "PASS" : "FAIL",
              r.message.c_str());
  std::fflush(stdout);
  return r;
}

}  // namespace flashjit::test

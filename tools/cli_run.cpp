// `flashjit run [SPEC]`: compile, run on random inputs, verify against the fp64 reference, time.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <random>

#include "flashjit/reference.hpp"
#include "tools/cli.hpp"

namespace flashjit::cli {

namespace {

// Forward FLOPs (DESIGN §9): 2·s_q·s_kv·(d_qk + d_v) per (batch, head), times the visible fraction.
double forward_flops(const ref::Problem& p) {
  return 2.0 * double(p.seq_q) * double(p.seq_kv) * ref::visible_fraction(p) * double(p.d_qk() + p.d_v()) *
         double(p.batch * p.heads_q);
}

void fill_random(std::vector<uint16_t>& v, size_t n, DType dt, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  v.resize(n);
  for (auto& x : v) x = ref::to_half_bits(dist(rng), dt);
}

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t pos; (pos = s.find(sep, start)) != std::string::npos; start = pos + 1)
    out.push_back(s.substr(start, pos - start));
  out.push_back(s.substr(start));
  return out;
}

int compile_only(const AttentionSpec& spec, const Error& why) {
  CompiledKernel k = compile_to_ptx(spec);
  std::cout << "compiled " << k.key << " for " << k.arch << ": " << spec.canonical() << "  config " << k.config.str()
            << " (" << k.config_reason << ")\n  PTX " << k.ptx.size() << " bytes";
  PtxasReport r = run_ptxas(k.ptx, k.arch);
  if (r.ran && r.ok)
    std::cout << "; ptxas " << k.arch << ": " << r.registers << " registers, " << r.spill_stores << " B spill stores, "
              << r.spill_loads << " B spill loads";
  else if (r.ran)
    std::cout << "; ptxas FAILED:\n" << r.log;
  else
    std::cout << "; ptxas not found (registers unknown)";
  std::cout << "\nnothing ran: " << why.what() << "\n";
  return kNoGpu;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  Args a = parse_args(
      argc, argv, 2,
      {"--batch", "--heads", "--heads-kv", "--seq-q", "--seq-kv", "--seq", "--reps", "--seed", "--device", "--config"},
      {"--help", "--no-verify"});
  if (a.has("--help")) {
    std::cout
        << "usage: flashjit run [SPEC] [--batch B] [--heads H] [--heads-kv HKV] [--seq S | --seq-q SQ --seq-kv SKV]\n"
           "                    [--reps N] [--seed N] [--device N] [--config bm,bn,warps,stages[;...]] [--no-verify]\n"
           "Compiles SPEC (default: bf16, d=128, causal), runs it on random N(0,1) inputs, checks the output\n"
           "against the fp64 reference by the FlashAttention rule (error <= 2x a same-dtype implementation's),\n"
           "and prints the kernel used, its median time and TFLOP/s. Defaults: batch 4, heads 2048/d, seq 4096\n"
           "(16k tokens, hidden 2048). Without a GPU it compiles, reports the kernel and exits 69.\n";
    return kOk;
  }
  if (a.positional.size() > 1) throw Error(ErrorKind::usage, "run takes at most one SPEC file");
  AttentionSpec spec = load_spec_arg(a.positional.empty() ? std::nullopt : std::optional(a.positional[0]));
  std::optional<Runtime> rt;
  try {
    rt = Runtime::create(static_cast<int>(a.get_int("--device", 0)));
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::no_gpu) throw;
    return compile_only(spec, e);
  }
  ref::Problem p;
  p.spec = spec;
  p.batch = a.get_int("--batch", 4);
  p.heads_q = a.get_int("--heads", std::max(1, 2048 / spec.head_dim_qk));
  p.heads_kv = a.get_int("--heads-kv", p.heads_q);
  const int64_t seq = a.get_int("--seq", 4096);
  p.seq_q = a.get_int("--seq-q", seq);
  p.seq_kv = a.get_int("--seq-kv", seq);
  // One or more tile configs ("bm,bn,warps,stages;..."): each is compiled, verified and timed on
  // the same inputs, so configs compare side by side. None: the heuristic table's.
  std::vector<std::optional<TileConfig>> configs;
  if (auto c = a.get("--config")) {
    for (const std::string& one : split_list(*c, ';')) {
      TileConfig t;
      if (std::sscanf(one.c_str(), "%d,%d,%d,%d", &t.block_m, &t.block_n, &t.num_warps, &t.num_stages) != 4)
        throw Error(ErrorKind::usage, "--config expects bm,bn,warps,stages[;bm,bn,warps,stages...], got '" + one + "'");
      configs.push_back(t);
    }
  } else {
    configs.push_back(std::nullopt);
  }

  std::mt19937_64 rng(static_cast<uint64_t>(a.get_int("--seed", 1)));
  const int64_t d_qk = p.d_qk(), d_v = p.d_v();
  fill_random(p.q, p.batch * p.seq_q * p.heads_q * d_qk, p.dtype(), rng);
  fill_random(p.k, p.batch * p.seq_kv * p.heads_kv * d_qk, p.dtype(), rng);
  fill_random(p.v, p.batch * p.seq_kv * p.heads_kv * d_v, p.dtype(), rng);
  ref::fill_spec_tensors(p, rng());
  std::vector<DeviceBuffer> tensor_buffers;
  std::vector<BufferArg> buffer_args;
  for (const ref::HostTensor& t : p.tensors) {
    const bool i32 = !t.i32.empty() || t.f32.empty();
    const size_t n = i32 ? t.i32.size() : t.f32.size();
    tensor_buffers.push_back(rt->alloc(n * 4));
    tensor_buffers.back().upload(i32 ? static_cast<const void*>(t.i32.data()) : t.f32.data(), n * 4);
    buffer_args.push_back({t.name, tensor_buffers.back().data(), int64_t(n)});
  }
  DeviceBuffer q = rt->alloc(p.q.size() * 2), k = rt->alloc(p.k.size() * 2), v = rt->alloc(p.v.size() * 2);
  const size_t o_elems = p.batch * p.seq_q * p.heads_q * d_v;
  DeviceBuffer o = rt->alloc(o_elems * 2), lse = rt->alloc(p.batch * p.heads_q * p.seq_q * 4);
  q.upload(p.q.data(), q.size());
  k.upload(p.k.data(), k.size());
  v.upload(p.v.data(), v.size());
  ForwardArgs args;
  args.batch = p.batch;
  args.seq_q = p.seq_q;
  args.seq_kv = p.seq_kv;
  args.heads_q = p.heads_q;
  args.heads_kv = p.heads_kv;
  args.q = bshd(q.data(), p.seq_q, p.heads_q, d_qk);
  args.k = bshd(k.data(), p.seq_kv, p.heads_kv, d_qk);
  args.v = bshd(v.data(), p.seq_kv, p.heads_kv, d_v);
  args.o = bshd(o.data(), p.seq_q, p.heads_q, d_v);
  args.lse = static_cast<float*>(lse.data());
  args.buffers = buffer_args;
  const double flops = forward_flops(p);
  bool all_ok = true;
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    CompileOptions opts;
    opts.config = configs[ci];
    Kernel kernel;
    try {
      kernel = rt->compile(spec, opts);
    } catch (const Error& e) {
      if (configs.size() == 1 || e.kind() != ErrorKind::spec) throw;
      std::cout << "config   " << configs[ci]->str() << " rejected: " << e.what() << "\n";
      continue;
    }
    const CompiledKernel& ck = kernel.compiled();
    o.fill_bytes(0xFF);  // NaN poison: an unwritten element fails verification
    lse.fill_bytes(0xFF);
    kernel.forward(args);
    rt->synchronize();

    bool ok = true;
    std::string verdict = "not verified (--no-verify)";
    if (!a.has("--no-verify")) {
      std::vector<uint16_t> out(o_elems);
      std::vector<float> lse_host(p.batch * p.heads_q * p.seq_q);
      o.download(out.data(), out.size() * 2);
      lse.download(lse_host.data(), lse_host.size() * 4);
      ref::Verdict vd = ref::verify(p, out, &lse_host);
      ok = vd.ok;
      verdict = vd.message;
    }
    all_ok = all_ok && ok;
    const double ms = rt->time_forward(kernel, args, 3, static_cast<int>(a.get_int("--reps", 20)));
    const double tflops = flops / (ms * 1e-3) / 1e12;
    if (ci == 0)
      std::cout << "device   " << rt->device().name << " (" << rt->device().arch() << ", " << rt->device().sm_count
                << " SMs)\n"
                << "spec     " << (spec.name.empty() ? "" : spec.name + ": ")
                << (spec.dtype == DType::f16 ? "fp16" : "bf16") << " d=" << spec.head_dim_qk
                << (spec.head_dim_v != spec.head_dim_qk ? "/" + std::to_string(spec.head_dim_v) : "")
                << " mask=" << spec.mask << (spec.score != "score" ? " score=" + spec.score : "") << "\n"
                << "shape    batch " << p.batch << ", heads " << p.heads_q << "/" << p.heads_kv << ", seq_q " << p.seq_q
                << ", seq_kv " << p.seq_kv << "\n";
    std::cout << "kernel   " << ck.key << " " << ck.description << " (" << ck.config_reason << "), "
              << kernel.registers() << " regs, " << kernel.spill_bytes() << " B local\n"
              << "verify   " << verdict << "\n"
              << std::fixed << std::setprecision(3) << "time     " << ms << " ms (median)\n"
              << std::setprecision(1) << "perf     " << tflops << " TFLOP/s\n"
              << std::defaultfloat;
  }
  return all_ok ? kOk : kFailure;
}

}  // namespace flashjit::cli

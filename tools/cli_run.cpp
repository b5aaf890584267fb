// `flashjit run [SPEC]`: compile, run on random inputs, verify against the fp64 reference, time.
#include <algorithm>
#include <climits>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <random>

#include "flashjit/reference.hpp"
#include "tools/cli.hpp"
#include "tools/cli_json.hpp"
#include "tools/cli_run_paged.hpp"
#include "tools/cli_run_varlen.hpp"
#include "tools/cli_spec_flags.hpp"

namespace flashjit::cli {

namespace {

// 0 in a size field: not given (heads: 2048/d, hidden 2048; heads_kv: heads; seq_q, seq_kv: seq).
struct RunArgs {
  std::string spec;  // "" → default_spec()
  int64_t batch = 4, heads = 0, heads_kv = 0, seq = 4096, seq_q = 0, seq_kv = 0;
  int reps = 20;
  int64_t seed = 1;
  int device = 0;
  std::string configs;  // "" → the heuristic table's
  bool no_verify = false;
  bool backward = false;
  std::string backward_config;  // "" → the backward's heuristic
  bool deterministic = false;   // BackwardArgs::deterministic
  bool json = false;
  int splits = 0;  // ForwardArgs::num_splits
  std::string varlen;  // "Q[:KV],...": packed sequences (tools/cli_run_varlen.hpp)
  int64_t paged = 0;   // page size of a paged K/V cache (tools/cli_run_paged.hpp); 0: contiguous
  SpecFlags flags;
};

// --json: the run as one object on stdout (spec, device, shape, then one entry per tile config).
struct JsonReport {
  JsonObject head;
  std::vector<std::string> runs;
};

std::string spec_summary(const AttentionSpec& spec) {
  return JsonObject().str("name", spec.name).str("dtype", spec.dtype == DType::f16 ? "fp16" : "bf16")
      .integer("head_dim", spec.head_dim_qk).integer("head_dim_v", spec.head_dim_v).str("mask", spec.mask)
      .str("score", spec.score).dump();
}

// Forward FLOPs, FlashAttention's convention (docs/perf-notes.md): 2·s_q·s_kv·(d_qk + d_v) per
// (batch, head), times the fraction of (query, key) pairs the mask leaves visible.
double forward_flops(const ref::Problem& p) {
  return 2.0 * double(p.seq_q) * double(p.seq_kv) * ref::visible_fraction(p) * double(p.d_qk() + p.d_v()) *
         double(p.batch * p.heads_q);
}

void fill_random(std::vector<uint16_t>& v, size_t n, DType dt, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  v.resize(n);
  for (auto& x : v) x = ref::to_half_bits(dist(rng), dt);
}

int compile_only(const AttentionSpec& spec, const Error& why, bool backward, bool json) {
  CompileOptions opts;
  opts.backward = backward;
  CompiledKernel k = compile_to_ptx(spec, opts);
  if (json) {
    PtxasReport r = run_ptxas(k.ptx, k.arch, k.entry);
    JsonObject j;
    j.raw("spec", spec_summary(spec)).boolean("ran", false).str("reason", why.what()).str("key", k.key);
    j.str("arch", k.arch).str("config", k.config.str()).str("config_reason", k.config_reason);
    j.integer("ptx_bytes", int64_t(k.ptx.size()));
    if (r.ran && r.ok) j.integer("registers", r.registers).integer("spill_stores", r.spill_stores);
    std::cout << j.dump() << "\n";
    return kNoGpu;
  }
  std::cout << "compiled " << k.key << " for " << k.arch << ": " << spec.canonical() << "  config " << k.config.str()
            << " (" << k.config_reason << ")\n  PTX " << k.ptx.size() << " bytes";
  PtxasReport r = run_ptxas(k.ptx, k.arch, k.entry);
  if (r.ran && r.ok)
    std::cout << "; ptxas " << k.arch << ": " << r.registers << " registers, " << r.spill_stores << " B spill stores, "
              << r.spill_loads << " B spill loads";
  else if (r.ran)
    std::cout << "; ptxas FAILED:\n" << r.log;
  else if (!r.path.empty())
    std::cout << "; ptxas " << r.path << " did not run (registers unknown)";
  else
    std::cout << "; ptxas not found (registers unknown)";
  std::cout << "\nnothing ran: " << why.what() << "\n";
  return kNoGpu;
}


ref::Problem make_problem(const AttentionSpec& spec, const RunArgs& a) {
  ref::Problem p;
  p.spec = spec;
  p.batch = a.batch;
  p.heads_q = a.heads ? a.heads : std::max(1, 2048 / spec.head_dim_qk);
  p.heads_kv = a.heads_kv ? a.heads_kv : p.heads_q;
  p.seq_q = a.seq_q ? a.seq_q : a.seq;
  p.seq_kv = a.seq_kv ? a.seq_kv : a.seq;
  if (p.heads_q % p.heads_kv != 0)
    throw Error(ErrorKind::usage, "--heads " + std::to_string(p.heads_q) + " is not a multiple of --heads-kv " +
                                      std::to_string(p.heads_kv) + " (GQA/MQA share each key head among query heads)");
  return p;
}

void fill_inputs(ref::Problem& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  fill_random(p.q, p.batch * p.seq_q * p.heads_q * p.d_qk(), p.dtype(), rng);
  fill_random(p.k, p.batch * p.seq_kv * p.heads_kv * p.d_qk(), p.dtype(), rng);
  fill_random(p.v, p.batch * p.seq_kv * p.heads_kv * p.d_v(), p.dtype(), rng);
  ref::fill_spec_tensors(p, rng());
}

// The problem's inputs and outputs on the device, and the launch arguments over them.
struct DeviceProblem {
  std::vector<DeviceBuffer> tensors;
  std::vector<BufferArg> buffer_args;
  DeviceBuffer q, k, v, o, lse;
  ForwardArgs args;
};

void upload(const Runtime& rt, const ref::Problem& p, DeviceProblem& d) {
  for (const ref::HostTensor& t : p.tensors) {
    const bool i32 = !t.i32.empty() || t.f32.empty();
    const size_t n = i32 ? t.i32.size() : t.f32.size();
    d.tensors.push_back(rt.alloc(n * 4));
    d.tensors.back().upload(i32 ? static_cast<const void*>(t.i32.data()) : t.f32.data(), n * 4);
    d.buffer_args.push_back({t.name, d.tensors.back().data(), int64_t(n)});
  }
  d.q = rt.alloc(p.q.size() * 2), d.k = rt.alloc(p.k.size() * 2), d.v = rt.alloc(p.v.size() * 2);
  d.o = rt.alloc(p.batch * p.seq_q * p.heads_q * p.d_v() * 2);
  d.lse = rt.alloc(p.batch * p.heads_q * p.seq_q * 4);
  d.q.upload(p.q.data(), d.q.size());
  d.k.upload(p.k.data(), d.k.size());
  d.v.upload(p.v.data(), d.v.size());
  ForwardArgs& args = d.args;
  static_cast<ProblemShape&>(args) = p;
  args.q = bshd(d.q.data(), p.seq_q, p.heads_q, p.d_qk());
  args.k = bshd(d.k.data(), p.seq_kv, p.heads_kv, p.d_qk());
  args.v = bshd(d.v.data(), p.seq_kv, p.heads_kv, p.d_v());
  args.o = bshd(d.o.data(), p.seq_q, p.heads_q, p.d_v());
  args.lse = static_cast<float*>(d.lse.data());
  args.buffers = d.buffer_args;
}

// Bytes of K and V one forward reads at least once (what bounds a decode step, seq_q ≪ seq_kv).
double kv_bytes(const ref::Problem& p) {
  return 2.0 * double(p.batch * p.seq_kv * p.heads_kv) * double(p.d_qk() + p.d_v());
}

void print_header(const Runtime& rt, const ref::Problem& p, JsonReport* json) {
  const AttentionSpec& spec = p.spec;
  if (json) {
    json->head.raw("spec", spec_summary(spec)).boolean("ran", true);
    json->head.raw("device", JsonObject().str("name", rt.device().name).str("arch", rt.device().arch())
                                 .integer("sm_count", rt.device().sm_count)
                                 .str("assembler", rt.device().assembler).dump());
    json->head.raw("shape", JsonObject().integer("batch", p.batch).integer("heads_q", p.heads_q)
                                .integer("heads_kv", p.heads_kv).integer("seq_q", p.seq_q).integer("seq_kv", p.seq_kv)
                                .dump());
    return;
  }
  std::cout << "device   " << rt.device().name << " (" << rt.device().arch() << ", " << rt.device().sm_count
            << " SMs; PTX assembled by " << rt.device().assembler << ")\n"
            << "spec     " << (spec.name.empty() ? "" : spec.name + ": ")
            << (spec.dtype == DType::f16 ? "fp16" : "bf16") << " d=" << spec.head_dim_qk
            << (spec.head_dim_v != spec.head_dim_qk ? "/" + std::to_string(spec.head_dim_v) : "")
            << " mask=" << spec.mask << (spec.score != "score" ? " score=" + spec.score : "") << "\n"
            << "shape    batch " << p.batch << ", heads " << p.heads_q << "/" << p.heads_kv << ", seq_q " << p.seq_q
            << ", seq_kv " << p.seq_kv << "\n";
}

// Launches `kernel` on outputs poisoned with NaN (an unwritten element fails verification),
// verifies unless told not to, times it and prints one block. Returns whether it verified.
bool run_one(const Runtime& rt, const Kernel& kernel, const ref::Problem& p, DeviceProblem& d, const RunArgs& a,
             JsonObject* json) {
  const CompiledKernel& ck = kernel.compiled();
  d.o.fill_bytes(0xFF);
  d.lse.fill_bytes(0xFF);
  kernel.forward(d.args);
  rt.synchronize();
  bool ok = true;
  std::string verdict = "not verified (--no-verify)";
  if (!a.no_verify) {
    std::vector<uint16_t> out(d.o.size() / 2);
    std::vector<float> lse_host(d.lse.size() / 4);
    d.o.download(out.data(), d.o.size());
    d.lse.download(lse_host.data(), d.lse.size());
    ref::Verdict vd = ref::verify(p, out, &lse_host);
    ok = vd.ok;
    verdict = vd.message;
  }
  const double ms = rt.time_forward(kernel, d.args, 3, a.reps);
  // The module the timed calls launched: the shape's tuned or decode config, split, packed.
  const std::string launch = kernel.describe_launch(d.args);
  const double tflops = forward_flops(p) / (ms * 1e-3) / 1e12;
  const double kv_tbs = kv_bytes(p) / (ms * 1e-3) / 1e12;
  if (json) {
    json->str("key", ck.key).str("description", ck.description).str("config", ck.config.str());
    json->str("config_reason", ck.config_reason).integer("registers", kernel.registers());
    json->integer("spill_bytes", kernel.spill_bytes()).boolean("verified", !a.no_verify).boolean("ok", ok);
    json->str("verdict", verdict).num("ms", ms).num("tflops", tflops).num("kv_tb_per_s", kv_tbs);
    json->str("launch", launch);
    return ok;
  }
  std::cout << "kernel   " << ck.key << " " << ck.description << " (" << ck.config_reason << "), " << kernel.registers()
            << " regs, " << kernel.spill_bytes() << " B local\n"
            << "launch   " << launch << "\n"
            << "verify   " << verdict << "\n"
            << std::fixed << std::setprecision(3) << "time     " << ms << " ms (median)\n"
            << std::setprecision(1) << "perf     " << tflops << " TFLOP/s, " << std::setprecision(2) << kv_tbs
            << " TB/s of K and V\n"
            << std::defaultfloat;
  return ok;
}

// The backward on the forward's O and LSE with a random dO; dQ, dK, dV poisoned with NaN, verified
// against the fp64 reference backward and timed (FlashAttention's convention: a backward does 2.5×
// the forward's FLOPs).
bool run_backward(const Runtime& rt, const Kernel& kernel, const ref::Problem& p, DeviceProblem& d, const RunArgs& a,
                  JsonObject* json) {
  std::mt19937_64 rng(static_cast<uint64_t>(a.seed) + 1);
  std::vector<uint16_t> d_o;
  fill_random(d_o, d.o.size() / 2, p.dtype(), rng);
  DeviceBuffer d_o_dev = rt.alloc(d.o.size()), dq = rt.alloc(d.q.size()), dk = rt.alloc(d.k.size()),
               dv = rt.alloc(d.v.size());
  d_o_dev.upload(d_o.data(), d_o_dev.size());
  BackwardArgs b;
  static_cast<ProblemShape&>(b) = p;
  b.q = d.args.q, b.k = d.args.k, b.v = d.args.v, b.o = d.args.o;
  b.d_o = bshd(d_o_dev.data(), p.seq_q, p.heads_q, p.d_v());
  b.dq = bshd(dq.data(), p.seq_q, p.heads_q, p.d_qk());
  b.dk = bshd(dk.data(), p.seq_kv, p.heads_kv, p.d_qk());
  b.dv = bshd(dv.data(), p.seq_kv, p.heads_kv, p.d_v());
  b.lse = d.args.lse;
  b.buffers = d.args.buffers;
  b.deterministic = a.deterministic;
  for (DeviceBuffer* g : {&dq, &dk, &dv}) g->fill_bytes(0xFF);
  kernel.forward(d.args);
  kernel.backward(b);
  rt.synchronize();
  bool ok = true;
  std::string verdict = "not verified (--no-verify)";
  if (!a.no_verify) {
    std::vector<uint16_t> hq(dq.size() / 2), hk(dk.size() / 2), hv(dv.size() / 2);
    dq.download(hq.data(), dq.size());
    dk.download(hk.data(), dk.size());
    dv.download(hv.data(), dv.size());
    ref::BackwardVerdict vd = ref::verify_backward(p, d_o, hq, hk, hv);
    ok = vd.ok;
    verdict = vd.message;
  }
  const double ms = rt.time_backward(kernel, b, 3, a.reps);
  const CompiledKernel& ck = kernel.backward_compiled(p, a.deterministic);  // the module these calls ran
  if (json) {
    json->raw("backward", JsonObject().str("key", ck.key).str("description", ck.description)
                              .str("config_reason", ck.config_reason).boolean("deterministic", a.deterministic).boolean("ok", ok).str("verdict", verdict)
                              .num("ms", ms).num("tflops", 2.5 * forward_flops(p) / (ms * 1e-3) / 1e12).dump());
    return ok;
  }
  std::cout << "backward " << ck.key << " " << ck.description << " (" << ck.config_reason << ")\n"
            << "verify   " << verdict << "\n"
            << std::fixed << std::setprecision(3) << "time     " << ms << " ms backward (median)\n"
            << std::setprecision(1) << "perf     " << 2.5 * forward_flops(p) / (ms * 1e-3) / 1e12
            << " TFLOP/s backward" << (a.deterministic ? " (deterministic)" : "") << "\n"
            << std::defaultfloat;
  return ok;
}

int run(const RunArgs& a) {
  const AttentionSpec spec = spec_from_args(a.spec, a.flags, true);
  ref::Problem p = make_problem(spec, a);
  // One or more tile configs, each compiled, verified and timed on the same inputs so that they
  // compare side by side. None: the heuristic table's.
  std::vector<std::optional<TileConfig>> configs;
  if (a.configs.empty()) configs.push_back(std::nullopt);
  for (const TileConfig& t : a.configs.empty() ? std::vector<TileConfig>{} : parse_tile_configs(a.configs))
    configs.push_back(t);
  if (!a.varlen.empty() && (a.backward || a.json || configs.size() > 1 || a.paged))
    throw Error(ErrorKind::usage, "--varlen runs one forward: it cannot be combined with --backward, --json, --paged or "
                                  "several --config");
  if (a.deterministic && !a.backward) throw Error(ErrorKind::usage, "--deterministic is a backward option: add --backward");
  if (a.paged && (a.backward || a.json || configs.size() > 1))
    throw Error(ErrorKind::usage, "--paged runs one forward: it cannot be combined with --backward, --json or several --config");
  if (a.paged % 16 != 0)
    throw Error(ErrorKind::usage, "--paged " + std::to_string(a.paged) + ": the page size must be a positive multiple of 16");
  std::optional<Runtime> rt;
  try {
    rt = Runtime::create(a.device);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::no_gpu) throw;
    return compile_only(spec, e, a.backward, a.json);
  }
  if (!a.varlen.empty()) {
    VarlenRun v;
    parse_varlen_lengths(a.varlen, v.q, v.kv);
    v.heads_q = p.heads_q, v.heads_kv = p.heads_kv;
    v.seed = static_cast<uint64_t>(a.seed), v.splits = a.splits, v.reps = a.reps, v.verify = !a.no_verify;
    v.options.config = configs.front();
    return run_varlen(*rt, spec, v);
  }
  fill_inputs(p, static_cast<uint64_t>(a.seed));
  if (a.paged) {
    PagedRun pr;
    pr.page_size = a.paged;
    pr.seed = static_cast<uint64_t>(a.seed), pr.splits = a.splits, pr.reps = a.reps, pr.verify = !a.no_verify;
    pr.options.config = configs.front();
    return run_paged(*rt, p, pr);
  }
  DeviceProblem d;
  upload(*rt, p, d);
  d.args.num_splits = a.splits;
  bool all_ok = true, first = true;
  JsonReport report;
  JsonReport* json = a.json ? &report : nullptr;
  for (const std::optional<TileConfig>& config : configs) {
    CompileOptions opts;
    opts.config = config;
    if (!a.backward_config.empty()) opts.backward_config = parse_tile_config(a.backward_config);
    Kernel kernel;
    try {
      kernel = rt->compile(spec, opts);
      kernel.wait_full();  // the timings below are of the full kernel, not a tiered compile's quick form
    } catch (const Error& e) {
      if (configs.size() == 1 || e.kind() != ErrorKind::spec) throw;
      if (json) report.runs.push_back(JsonObject().str("config", config->str()).str("rejected", e.what()).dump());
      else std::cout << "config   " << config->str() << " rejected: " << e.what() << "\n";
      continue;
    }
    if (first) print_header(*rt, p, json);
    first = false;
    JsonObject entry;
    all_ok = run_one(*rt, kernel, p, d, a, json ? &entry : nullptr) && all_ok;
    if (a.backward) all_ok = run_backward(*rt, kernel, p, d, a, json ? &entry : nullptr) && all_ok;
    if (json) report.runs.push_back(entry.dump());
  }
  if (json) std::cout << report.head.boolean("ok", all_ok).raw("runs", json_array(report.runs)).dump() << "\n";
  return all_ok ? kOk : kFailure;
}

}  // namespace

Command add_run(CLI::App& app) {
  CLI::App* sub =
      app.add_subcommand("run", "compile, run on random inputs, verify against the fp64 reference, time it");
  sub->footer(
      "Compiles SPEC (default: bf16, d=128, causal), runs it on random N(0,1) inputs, checks the output\n"
      "against the fp64 reference by the FlashAttention rule (error <= 2x a same-dtype implementation's),\n"
      "and prints the kernel used, its median time and TFLOP/s. Defaults: batch 4, heads 2048/d, seq 4096\n"
      "(16k tokens, hidden 2048). Without a GPU it compiles, reports the kernel and exits 69.");
  auto a = std::make_shared<RunArgs>();
  const CLI::Validator positive = integer_in(1);
  sub->add_option("SPEC", a->spec, "the spec (YAML file), or the spec flags below; default: bf16 d=128 causal")
          ->type_name("");
  sub->add_option("--batch", a->batch, "batch size")->type_name("N")->check(positive)->capture_default_str();
  sub->add_option("--heads", a->heads, "query heads (default 2048/d)")->type_name("N")->check(positive);
  sub->add_option("--heads-kv", a->heads_kv, "key/value heads, dividing --heads (default: --heads)")
      ->type_name("N")
      ->check(positive);
  sub->add_option("--seq", a->seq, "sequence length of queries and keys")
      ->type_name("N")
      ->check(positive)
      ->capture_default_str();
  sub->add_option("--seq-q", a->seq_q, "query sequence length (default --seq)")->type_name("N")->check(positive);
  sub->add_option("--seq-kv", a->seq_kv, "key sequence length (default --seq)")->type_name("N")->check(positive);
  sub->add_option("--reps", a->reps, "timed launches (median reported)")
      ->type_name("N")
      ->check(integer_in(1, INT_MAX))
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "seed of the random inputs")
      ->type_name("N")
      ->check(integer_in(0))
      ->capture_default_str();
  sub->add_option("--device", a->device, "CUDA device ordinal")
      ->type_name("N")
      ->check(integer_in(0, INT_MAX))
      ->capture_default_str();
  sub->add_option("--config", a->configs, "tile configs to compare (default: the heuristic's)")
      ->type_name("BM,BN,WARPS,STAGES[;...]")
      ->check(parsed_by(parse_tile_configs));
  sub->add_option("--splits", a->splits,
                  "split-KV pieces per row (ForwardArgs::num_splits): 0 automatic, 1 never, 2..128")
      ->type_name("N")
      ->check(integer_in(0, 128))
      ->capture_default_str();
  sub->add_option("--varlen", a->varlen,
                  "packed sequences (cu_seqlens), lengths Q or Q:KV per sequence, e.g. 1:4096,1:100,17 "
                  "(--batch, --seq, --seq-q and --seq-kv are then not used)")
      ->type_name("LENGTHS")
      ->check(parsed_by([](const std::string& s) {
        std::vector<int64_t> q, kv;
        parse_varlen_lengths(s, q, kv);
      }));
  sub->add_option("--paged", a->paged,
                  "K and V in a paged cache of PAGE_SIZE-row pages (a positive multiple of 16) under a shuffled "
                  "block table, checked against the contiguous problem's reference")
      ->type_name("PAGE_SIZE")
      ->check(integer_in(16, INT32_MAX));
  sub->add_flag("--no-verify", a->no_verify, "skip the check against the fp64 reference");
  sub->add_flag("--backward", a->backward,
                "also run the backward (dQ, dK, dV for a random dO), verify it against the fp64 reference "
                "backward and time it");
  sub->add_option("--backward-config", a->backward_config, "with --backward: its tile config (default: its heuristic's)")
      ->type_name("BM,BN,WARPS,STAGES")
      ->check(parsed_by(parse_tile_config));
  sub->add_flag("--deterministic", a->deterministic,
                "with --backward: bitwise-identical gradients from run to run (dQ by its own kernel, not summed "
                "by the dK/dV kernel's reductions)");
  sub->add_flag("--json", a->json, "print one JSON object (spec, device, shape, per config: kernel, verdict, time)");
  add_spec_flags(sub, a->flags);
  return {sub, [a] { return run(*a); }};
}

}  // namespace flashjit::cli

#include "runtime/tuner.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "autotune/json_text.hpp"
#include "autotune/sha256.hpp"
#include "autotune/tuning_cache.hpp"
#include "flashjit/reference.hpp"
#include "support/knobs.hpp"
#include "support/log.hpp"
#include "templates/forward_plan.hpp"

namespace flashjit::rt {

using autotune::Measurement;
using autotune::TuneMode;

namespace {

struct Counts {
  std::atomic<uint64_t> tunes{0}, hits{0}, lookups{0};
};
Counts& counts() {
  static Counts c;
  return c;
}

// Tuning-cache lookups, memoised per process: (GPU file stem | flashjit version | key) → entry.
std::mutex memo_mu;
std::map<std::string, std::optional<autotune::TuningEntry>>& memo() {
  static std::map<std::string, std::optional<autotune::TuningEntry>> m;
  return m;
}
std::string memo_key(const autotune::GpuIdentity& gpu, const autotune::TuningKey& key) {
  return cache_root() + "|" + gpu.file_stem() + "|" + key.str();
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string ms3(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms);
  return buf;
}

double quantile(const std::vector<float>& sorted, double p) {
  const size_t i = static_cast<size_t>(std::lround(p * double(sorted.size() - 1)));
  return sorted[std::min(i, sorted.size() - 1)];
}

// Inputs, L2 flush buffer, events and compiled kernels of one tuning job, set up on first use.
class Bench {
 public:
  Bench(const Runtime& rt, const Context& ctx, const TuneJob& job) : rt_(rt), ctx_(ctx), job_(job) {}
  ~Bench() {
    if (start_ || stop_) {
      const cu::Driver& d = cu::driver();
      cu::CUcontext popped = nullptr;
      if (d.cuCtxPushCurrent(ctx_.ctx) == cu::CUDA_SUCCESS) {
        if (start_) d.cuEventDestroy(start_);
        if (stop_) d.cuEventDestroy(stop_);
        d.cuCtxPopCurrent(&popped);
      }
    }
  }

  // The config's kernel (Runtime::compile: through the compile cache), or why it does not build.
  const Kernel* kernel(const TileConfig& c, std::string* why) {
    const std::string name = c.str();
    auto it = kernels_.find(name);
    if (it == kernels_.end()) {
      Built b;
      try {
        CompileOptions o;
        o.config = c;
        b.kernel = rt_.compile(job_.spec, o);
      } catch (const Error& e) {
        b.error = e.what();
      }
      it = kernels_.emplace(name, std::move(b)).first;
    }
    if (it->second.kernel) return &*it->second.kernel;
    *why = it->second.error;
    return nullptr;
  }

  std::string fingerprint(const TileConfig& c) {
    std::string why;
    const Kernel* k = kernel(c, &why);
    if (!k) throw Error(ErrorKind::compile, why);
    const CompiledKernel& ck = k->compiled();
    if (template_version_if_known() && knob::get("FLASHJIT_OVERRIDE_DIR").empty() &&
        knob::get("FLASHJIT_DUMP_DIR").empty()) {
      // The cubin, from the compile cache Runtime::compile just filled (a file read, no LLVM).
      CompileOptions o;
      o.config = c;
      o.arch = ck.arch;
      KernelCacheSettings s;
      s.driver_version = ctx_.info.driver_version;
      KernelBuild b = build_kernel(job_.spec, o, s, nullptr);
      if (!b.cubin.empty()) return binary_fingerprint(b.cubin, b.compiled);
    }
    // No cached cubin: the PTX decides the cubin (same driver), so equal PTX means equal binaries.
    return binary_fingerprint(ck.ptx, ck);
  }

  Measurement measure(const TileConfig& c) {
    Measurement m;
    std::string why;
    const Kernel* k = kernel(c, &why);
    if (!k) {
      m.failure_reason = "does not compile: " + why;
      return m;
    }
    try {
      setup();
      ContextGuard guard(ctx_);
      const cu::Driver& d = cu::driver();
      // Warm-up: module load, instruction cache, clocks; and a launch error shows here.
      for (int i = 0; i < 3; ++i) k->forward(sets_[i % sets_.size()]);
      cu::check(d.cuCtxSynchronize(), "cuCtxSynchronize (warm-up launch failed)");
      if (std::optional<std::string> wrong = check_output(c)) {
        m.failure_reason = *wrong;
        return m;
      }
      int reps = job_.reps > 0 ? job_.reps : job_.mode == TuneMode::full ? 20 : 10;
      std::vector<float> ms;
      for (int r = 0; r < reps; ++r) {
        // Evict the inputs from L2: the next launch reads them from HBM, as in a real model step.
        cu::check(d.cuMemsetD8(reinterpret_cast<cu::CUdeviceptr>(flush_.data()), static_cast<unsigned char>(r),
                               flush_.size()),
                  "cuMemsetD8(L2 flush)");
        cu::check(d.cuEventRecord(start_, nullptr), "cuEventRecord");
        k->forward(sets_[r % sets_.size()]);
        cu::check(d.cuEventRecord(stop_, nullptr), "cuEventRecord");
        cu::check(d.cuEventSynchronize(stop_), "cuEventSynchronize (a launch failed)");
        float t = 0;
        cu::check(d.cuEventElapsedTime(&t, start_, stop_), "cuEventElapsedTime");
        ms.push_back(t);
        if (r == 2 && ms[0] > 200) break;  // a very slow config: three samples tell enough
      }
      std::sort(ms.begin(), ms.end());
      m.ok = true;
      m.median_ms = quantile(ms, 0.5);
      m.p20_ms = quantile(ms, 0.2);
      m.p80_ms = quantile(ms, 0.8);
    } catch (const Error& e) {
      m = Measurement{};
      m.failure_reason = std::string("launch failed: ") + e.what();
    }
    return m;
  }

  static constexpr int kMaxTunedSpillBytes = 64;

  // Every config must compute what the first one measured computed (the heuristic's, when it
  // builds) on input set 0: a fast wrong kernel must never win. Two correct kernels differ by
  // their rounding, a few bf16/fp16 ulps of |O| ≤ max|V| ≈ 1.73 here; 0.1 is far above that and
  // far below what a broken kernel showed (max error 0.27–0.84: the ptxas register reuse of
  // docs/perf-notes.md §8, which this check caught on the H200). At most kMaxCheckedOutputs
  // elements are compared, spread evenly over the output; the stride is odd, so the samples walk
  // through every column of O.
  static constexpr float kMaxOutputDifference = 0.1f;
  static constexpr size_t kMaxCheckedOutputs = size_t(1) << 22;

  std::optional<std::string> check_output(const TileConfig& c) {
    std::vector<uint16_t> all(out_elems_);
    buffers_[kSet0Output].download(all.data(), all.size() * 2);
    const size_t stride = all.size() <= kMaxCheckedOutputs ? 1 : (all.size() / kMaxCheckedOutputs) | 1;
    std::vector<uint16_t> out;
    for (size_t i = 0; i < all.size(); i += stride) out.push_back(all[i]);
    if (baseline_.empty()) {
      for (uint16_t h : out)
        if (!std::isfinite(ref::from_half_bits(h, job_.spec.dtype)))
          return std::string("wrong output: non-finite values (no baseline yet)");
      baseline_ = std::move(out);
      baseline_name_ = c.str();
      return std::nullopt;
    }
    float worst = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const float diff = std::fabs(ref::from_half_bits(out[i], job_.spec.dtype) - ref::from_half_bits(baseline_[i], job_.spec.dtype));
      if (std::isnan(diff)) return "wrong output: non-finite where " + baseline_name_ + "'s is finite";
      worst = std::max(worst, diff);
    }
    if (worst <= kMaxOutputDifference) return std::nullopt;
    return "wrong output: differs from " + baseline_name_ + "'s by " + ms3(worst) + " (more than " +
           ms3(kMaxOutputDifference) + ")";
  }

  // The resource model: template limits, shared memory, then registers/spills from the driver.
  std::optional<std::string> prune(const TileConfig& c) {
    const DeviceInfo& info = ctx_.info;
    ForwardPlan plan;
    try {
      plan = plan_forward(job_.spec, c, "", info.arch());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    if (plan.shared_bytes > info.shared_per_block_optin)
      return "needs " + std::to_string(plan.shared_bytes) + " B of shared memory; " + info.name + " allows " +
             std::to_string(info.shared_per_block_optin) + " per block";
    std::string why;
    const Kernel* k = kernel(c, &why);
    if (!k) return "does not compile: " + why;
    // A few spilled registers stay in L1 and can cost less than what the config gains: on the
    // H200, bm128_bn64_w4_s2 at d=128 spills 24 B and runs 8% faster than any spill-free config
    // (docs/perf-notes.md §4). Larger spills are pruned untimed; small ones are measured.
    if (k->spill_bytes() > kMaxTunedSpillBytes)
      return "spills " + std::to_string(k->spill_bytes()) + " bytes (more than the " +
             std::to_string(kMaxTunedSpillBytes) + " a tuned config may)";
    if (int64_t(k->registers()) * plan.threads > 65536)
      return std::to_string(k->registers()) + " registers × " + std::to_string(plan.threads) +
             " threads exceed the 65536 registers of an SM";
    return std::nullopt;
  }

 private:
  struct Built {
    std::optional<Kernel> kernel;
    std::string error;
  };

  void setup() {
    if (!sets_.empty()) return;
    const TuneJob& j = job_;
    const int64_t dqk = j.spec.head_dim_qk, dv = j.spec.head_dim_v;
    const size_t nq = size_t(j.batch * j.seq_q * j.heads_q * dqk), nk = size_t(j.batch * j.seq_kv * j.heads_kv * dqk),
                 nv = size_t(j.batch * j.seq_kv * j.heads_kv * dv), no = size_t(j.batch * j.seq_q * j.heads_q * dv);
    const size_t nlse = size_t(j.batch * j.heads_q * j.seq_q);
    const size_t set_bytes = 2 * (nq + nk + nv + no) + 4 * nlse;
    const size_t l2 = size_t(std::max(ctx_.info.l2_bytes, 1 << 20));
    // Enough sets that one round over them exceeds the L2 (each launch then starts cold even
    // without the flush), at least 2, at most 32 and 8 GiB.
    size_t n_sets = std::clamp<size_t>(l2 / std::max<size_t>(set_bytes, 1) + 2, 2, 32);
    while (n_sets > 2 && n_sets * set_bytes > (size_t(8) << 30)) --n_sets;
    // Random N(0,1)-like values (uniform of the same variance is enough for timing).
    std::vector<uint16_t> host(std::max({nq, nk, nv}));
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (auto& h : host) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      h = ref::to_half_bits(float(double(x >> 11) / double(1ull << 53) * 3.4641 - 1.7320), j.spec.dtype);
    }
    for (size_t s = 0; s < n_sets; ++s) {
      DeviceBuffer q = rt_.alloc(nq * 2), k = rt_.alloc(nk * 2), v = rt_.alloc(nv * 2), o = rt_.alloc(no * 2),
                   lse = rt_.alloc(nlse * 4);
      q.upload(host.data(), nq * 2);
      k.upload(host.data(), nk * 2);
      v.upload(host.data(), nv * 2);
      ForwardArgs a;
      a.batch = j.batch, a.seq_q = j.seq_q, a.seq_kv = j.seq_kv, a.heads_q = j.heads_q, a.heads_kv = j.heads_kv;
      a.q = bshd(q.data(), j.seq_q, j.heads_q, dqk);
      a.k = bshd(k.data(), j.seq_kv, j.heads_kv, dqk);
      a.v = bshd(v.data(), j.seq_kv, j.heads_kv, dv);
      a.o = bshd(o.data(), j.seq_q, j.heads_q, dv);
      a.lse = static_cast<float*>(lse.data());
      a.params = j.params;
      sets_.push_back(a);
      for (DeviceBuffer* b : {&q, &k, &v, &o, &lse}) buffers_.push_back(std::move(*b));  // set 0's o: kSet0Output
    }
    // The spec's tensors: the caller's, else random contents of the declared shapes.
    std::vector<BufferArg> tensors = j.buffers;
    if (tensors.empty() && !j.spec.tensors.empty()) {
      ref::Problem p;
      p.spec = j.spec;
      p.batch = j.batch, p.seq_q = j.seq_q, p.seq_kv = j.seq_kv, p.heads_q = j.heads_q, p.heads_kv = j.heads_kv;
      ref::fill_spec_tensors(p, 1);
      for (const ref::HostTensor& t : p.tensors) {
        const bool i32 = !t.i32.empty() || t.f32.empty();
        const size_t n = i32 ? t.i32.size() : t.f32.size();
        DeviceBuffer b = rt_.alloc(n * 4);
        b.upload(i32 ? static_cast<const void*>(t.i32.data()) : t.f32.data(), n * 4);
        tensors.push_back({t.name, b.data(), int64_t(n)});
        buffers_.push_back(std::move(b));
      }
    }
    for (ForwardArgs& a : sets_) a.buffers = tensors;
    out_elems_ = no;
    flush_ = rt_.alloc(std::max<size_t>(2 * l2, 8 << 20));
    ContextGuard guard(ctx_);
    const cu::Driver& d = cu::driver();
    cu::check(d.cuEventCreate(&start_, cu::CU_EVENT_DEFAULT), "cuEventCreate");
    cu::check(d.cuEventCreate(&stop_, cu::CU_EVENT_DEFAULT), "cuEventCreate");
    log::debug("autotune: " + std::to_string(n_sets) + " input sets of " + std::to_string(set_bytes) +
               " bytes, L2 flush " + std::to_string(flush_.size()) + " bytes");
  }

  const Runtime& rt_;
  const Context& ctx_;
  const TuneJob& job_;
  std::map<std::string, Built> kernels_;
  static constexpr size_t kSet0Output = 3;  // buffers_ holds q, k, v, o, lse of each set in turn
  std::vector<DeviceBuffer> buffers_;
  size_t out_elems_ = 0;
  std::vector<uint16_t> baseline_;  // set 0's output from the first config measured
  std::string baseline_name_;
  std::vector<ForwardArgs> sets_;
  DeviceBuffer flush_;
  cu::CUevent start_ = nullptr, stop_ = nullptr;
};

TuneOutcome tune_in(const Runtime& runtime, const Context& ctx, const TuneJob& job) {
  TuneOutcome out;
  const DeviceInfo& info = ctx.info;
  out.gpu = autotune::gpu_identity(info);
  out.key = tuning_key(job.spec, job.batch, job.heads_q, job.seq_q, job.seq_kv);
  std::string reason;
  out.heuristic = heuristic_config(job.spec, info.arch(), &reason);
  Bench bench(runtime, ctx, job);
  autotune::SearchOptions so;
  so.mode = job.mode;
  so.heuristic = out.heuristic;
  so.deadline_s = job.deadline_s;
  so.progress = job.progress;
  autotune::SearchCallbacks cb;
  cb.prune = [&](const TileConfig& c) { return bench.prune(c); };
  cb.fingerprint = [&](const TileConfig& c) { return bench.fingerprint(c); };
  cb.measure = [&](const TileConfig& c) { return bench.measure(c); };
  log::info("autotune " + std::string(autotune::tune_mode_name(job.mode)) + ": " +
            (job.spec.name.empty() ? "spec " + out.key.spec_hash : job.spec.name) + " bucket " +
            out.key.bucket.str() + " on " + info.name);
  out.result = autotune::run_search(search_space_for(job.spec), so, cb);
  if (job.mode != TuneMode::off) ++counts().tunes;
  for (const autotune::Candidate& c : out.result.candidates)
    if (autotune::same_config(c.config, out.heuristic) && c.m.ok) out.heuristic_m = c.m;
  log::info("autotune " + out.key.str() + ": " + out.result.summary);
  if (out.result.measured && job.store) {
    autotune::TuningEntry e = autotune::tuning_entry_from(out.result, job.spec.name);
    e.mode = autotune::tune_mode_name(job.mode);
    e.date = utc_now();
    out.date = e.date;
    try {
      autotune::TuningCache(cache_root(), versions().flashjit).store(out.gpu, out.key, e);
      out.stored = true;
      e.flashjit_version = versions().flashjit;
      std::lock_guard<std::mutex> lock(memo_mu);
      memo()[memo_key(out.gpu, out.key)] = e;
    } catch (const std::exception& ex) {
      out.store_error = ex.what();
      log::warn(std::string("autotune: the result could not be stored in the tuning cache: ") + ex.what() +
                " (it is used in this process only)");
    }
  }
  return out;
}

// Whether `stream` is capturing a CUDA graph. An error (e.g. the legacy stream while another
// stream captures in global mode) counts as capturing: tuning then would break the capture.
bool stream_capturing(const Context& ctx, void* stream) {
  ContextGuard guard(ctx);
  int status = 0;  // CU_STREAM_CAPTURE_STATUS_NONE
  return cu::driver().cuStreamIsCapturing(static_cast<cu::CUstream>(stream), &status) != cu::CUDA_SUCCESS || status != 0;
}

}  // namespace

TuneMode tune_mode(const std::optional<std::string>& value) {
  return autotune::parse_tune_mode(value ? *value : knob::get("FLASHJIT_AUTOTUNE"));
}

std::string tuning_spec_hash(const AttentionSpec& spec) {
  AttentionSpec unnamed = spec;
  unnamed.name.clear();
  return autotune::sha256_hex(unnamed.canonical()).substr(0, 16);
}

autotune::TuningKey tuning_key(const AttentionSpec& spec, int64_t batch, int64_t heads_q, int64_t seq_q,
                               int64_t seq_kv) {
  return {tuning_spec_hash(spec),
          autotune::ShapeBucket::of(batch, heads_q, seq_q, seq_kv, spec.head_dim_qk, spec.head_dim_v)};
}

autotune::SearchSpace search_space_for(const AttentionSpec& spec) {
  autotune::SearchSpace s = autotune::default_search_space(std::max(spec.head_dim_qk, spec.head_dim_v));
  if (!spec.tune.block_m.empty()) s.block_m = spec.tune.block_m;
  if (!spec.tune.block_n.empty()) s.block_n = spec.tune.block_n;
  if (!spec.tune.num_warps.empty()) s.num_warps = spec.tune.num_warps;
  if (!spec.tune.num_stages.empty()) s.num_stages = spec.tune.num_stages;
  // The spec narrowed block_m or num_warps only: derive the other (block_m = 16 or 32 × num_warps).
  auto add = [](std::vector<int>& v, int x) {
    if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
  };
  if (!spec.tune.block_m.empty() && spec.tune.num_warps.empty()) {
    s.num_warps.clear();
    for (int bm : s.block_m)
      for (int w : {bm / 16, bm / 32})
        if (w == 1 || w == 2 || w == 4 || w == 8) add(s.num_warps, w);
  } else if (spec.tune.block_m.empty() && !spec.tune.num_warps.empty()) {
    s.block_m.clear();
    for (int w : s.num_warps) add(s.block_m, 16 * w), add(s.block_m, 32 * w);
  }
  s.legal = autotune::forward_template_legal;
  return s;
}

std::optional<autotune::TuningEntry> lookup_tuning(const DeviceInfo& device, const AttentionSpec& spec,
                                                   const autotune::TuningKey& key) {
  const autotune::GpuIdentity gpu = autotune::gpu_identity(device);
  const std::string mk = memo_key(gpu, key);
  ++counts().lookups;
  {
    std::lock_guard<std::mutex> lock(memo_mu);
    if (auto it = memo().find(mk); it != memo().end()) {
      if (it->second) ++counts().hits;
      return it->second;
    }
  }
  std::optional<autotune::TuningEntry> e;
  try {
    e = autotune::TuningCache(cache_root(), versions().flashjit).lookup(gpu, key);
  } catch (const std::exception& ex) {
    log::warn(std::string("tuning cache unreadable, treated as empty: ") + ex.what());
  }
  if (e) ++counts().hits;
  log::debug("tuning cache " + std::string(e ? "hit " : "miss ") + key.str() + " for " + gpu.str());
  std::lock_guard<std::mutex> lock(memo_mu);
  return memo().emplace(mk, e).first->second;
}

TuneOutcome tune_shape(const Runtime& runtime, const TuneJob& job) {
  std::shared_ptr<Context> ctx = open_context(runtime.device().ordinal);
  return tune_in(runtime, *ctx, job);
}

TunerCounters tuner_counters() {
  return {counts().tunes.load(), counts().hits.load(), counts().lookups.load()};
}

std::vector<TuneShape> parse_tune_shapes(const std::string& text) {
  std::vector<TuneShape> out;
  std::string t = text;
  for (size_t at; (at = t.find("\xC3\x97")) != std::string::npos;) t.replace(at, 2, "x");  // ×
  std::vector<std::string> list;
  for (size_t from = 0;;) {  // split by ',' keeping empty items (",," and a trailing ',' are errors)
    size_t comma = t.find(',', from);
    list.push_back(t.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  for (const std::string& item : list) {
    int64_t v[4] = {};
    int n = 0;
    std::stringstream parts(item);
    bool ok = !item.empty();
    for (std::string p; ok && std::getline(parts, p, 'x');) {
      char* end = nullptr;
      long long x = std::strtoll(p.c_str(), &end, 10);
      ok = !p.empty() && *end == '\0' && x > 0 && n < 4;
      if (ok) v[n++] = x;
    }
    if (!ok || n != 4)
      throw Error(ErrorKind::usage, "--shapes: '" + item + "' is not BxHxSqxSkv (four positive integers, e.g. 4x16x4096x4096)");
    out.push_back({v[0], v[1], v[2], v[3]});
  }
  if (out.empty()) throw Error(ErrorKind::usage, "--shapes needs at least one BxHxSqxSkv");
  return out;
}

// ---- flashjit tune -------------------------------------------------------------------------------

namespace {

const char* kTuneHelp =
    "usage: flashjit tune SPEC --shapes BxHxSqxSkv[,...] [--mode quick|full] [--deadline S] [--json] [--device N]\n"
    "Autotunes the tile config of SPEC for each shape (batch x heads x seq_q x seq_kv) on this GPU and\n"
    "stores the winners in the tuning cache (`flashjit cache list` shows them); Kernel::forward then uses\n"
    "them for every shape of the same bucket (sequence lengths and batch*heads rounded up to powers of two).\n"
    "--mode: quick (the heuristic's neighbourhood, ~6 configs; default unless FLASHJIT_AUTOTUNE=full) or\n"
    "full (the whole pruned space). --deadline S: stop timing a shape after S seconds, best so far wins.\n"
    "Progress lines go to stderr; the summary (tuned vs heuristic default) to stdout, as JSON with --json.\n"
    "Exit codes: 0 ok, 1 a shape had no working config, 2 usage or spec error, 69 no GPU, 70 internal error.\n";

int usage(std::ostream& err, const std::string& msg) {
  err << "flashjit tune: " << msg << "\n(see flashjit tune --help)\n";
  return 2;
}

}  // namespace

int run_tune_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    std::optional<std::string> spec_path, shapes_text, mode_text, deadline_text, device_text;
    bool json = false;
    for (size_t i = 0; i < args.size(); ++i) {
      std::string a = args[i], value;
      const bool has_eq = a.rfind("--", 0) == 0 && a.find('=') != std::string::npos;
      if (has_eq) value = a.substr(a.find('=') + 1), a = a.substr(0, a.find('='));
      auto take = [&](std::optional<std::string>& slot) {
        if (!has_eq) {
          if (i + 1 >= args.size()) throw Error(ErrorKind::usage, a + " needs a value");
          value = args[++i];
        }
        slot = value;
      };
      if (a == "--help" || a == "-h") {
        out << kTuneHelp;
        return 0;
      }
      if (a == "--shapes") take(shapes_text);
      else if (a == "--mode") take(mode_text);
      else if (a == "--deadline") take(deadline_text);
      else if (a == "--device") take(device_text);
      else if (a == "--json") json = true;
      else if (a.size() > 1 && a[0] == '-')
        return usage(err, "unknown option " + a + "; allowed: --shapes --mode --deadline --device --json --help");
      else if (spec_path) return usage(err, "tune takes one SPEC file");
      else spec_path = a;
    }
    if (!spec_path) return usage(err, "missing SPEC (a YAML spec file)");
    if (!shapes_text) return usage(err, "missing --shapes BxHxSqxSkv[,...]");
    const std::vector<TuneShape> shapes = parse_tune_shapes(*shapes_text);
    TuneMode mode = TuneMode::quick;
    if (mode_text) {
      mode = autotune::parse_tune_mode(*mode_text);
      if (mode == TuneMode::off) return usage(err, "--mode off tunes nothing; use quick or full");
    } else if (tune_mode() == TuneMode::full) {
      mode = TuneMode::full;
    }
    std::optional<double> deadline;
    if (deadline_text) {
      char* end = nullptr;
      double s = std::strtod(deadline_text->c_str(), &end);
      if (deadline_text->empty() || *end != '\0' || !(s > 0))
        return usage(err, "--deadline expects a positive number of seconds, got '" + *deadline_text + "'");
      deadline = s;
    }
    int device = 0;
    if (device_text) {
      char* end = nullptr;
      long d = std::strtol(device_text->c_str(), &end, 10);
      if (device_text->empty() || *end != '\0' || d < 0) return usage(err, "--device expects a device ordinal");
      device = int(d);
    }
    // The spec first: its errors are exit 2 with or without a GPU.
    std::ifstream f(*spec_path);
    if (!f) return usage(err, "cannot read spec file '" + *spec_path + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    AttentionSpec spec = AttentionSpec::from_yaml(ss.str(), *spec_path);
    spec.validate();

    std::optional<Runtime> rt;
    try {
      rt = Runtime::create(device);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::no_gpu) throw;
      err << "flashjit tune: " << e.what() << "\nflashjit tune: nothing ran (exit 69: no GPU driver or device); the spec "
          << *spec_path << " is valid, " << shapes.size() << " shape(s) were not tuned\n";
      return 69;
    }
    const DeviceInfo& info = rt->device();
    err << "tuning " << (spec.name.empty() ? *spec_path : spec.name) << " on " << info.name << " (" << info.arch()
        << ", driver " << info.driver_version << "), mode " << autotune::tune_mode_name(mode) << ", "
        << shapes.size() << " shape(s); cache " << cache_root() << "\n";
    std::vector<TuneOutcome> outcomes;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const TuneShape& s = shapes[i];
      TuneJob job;
      job.spec = spec;
      job.batch = s.batch, job.heads_q = job.heads_kv = s.heads, job.seq_q = s.seq_q, job.seq_kv = s.seq_kv;
      job.mode = mode;
      job.deadline_s = deadline;
      job.progress = &err;
      err << "shape " << (i + 1) << "/" << shapes.size() << ": " << s.batch << "x" << s.heads << "x" << s.seq_q << "x"
          << s.seq_kv << " (bucket " << tuning_key(spec, s.batch, s.heads, s.seq_q, s.seq_kv).bucket.str() << ")\n";
      outcomes.push_back(tune_shape(*rt, job));
      err << "  " << outcomes.back().result.summary << "\n";
    }
    bool all_ok = true;
    for (const TuneOutcome& o : outcomes) all_ok = all_ok && o.result.measured;
    if (json) {
      out << "[";
      for (size_t i = 0; i < outcomes.size(); ++i) {
        const TuneOutcome& o = outcomes[i];
        const TuneShape& s = shapes[i];
        out << (i ? ",\n " : "") << "{\"shape\": [" << s.batch << ", " << s.heads << ", " << s.seq_q << ", " << s.seq_kv
            << "], \"bucket\": " << autotune::json_quote(o.key.bucket.str())
            << ", \"key\": " << autotune::json_quote(o.key.str()) << ", \"gpu\": " << autotune::json_quote(o.gpu.str())
            << ", \"heuristic\": " << autotune::json_quote(o.heuristic.str()) << ", \"heuristic_ms\": "
            << autotune::json_number(o.heuristic_m ? o.heuristic_m->median_ms : NAN)
            << ", \"stored\": " << (o.stored ? "true" : "false") << ", \"search\": " << autotune::search_result_json(o.result)
            << "}";
      }
      out << "]\n";
    } else {
      out << std::left << std::setw(22) << "shape" << std::setw(34) << "bucket" << std::setw(18) << "tuned"
          << std::setw(20) << "median [p20,p80] ms" << std::setw(20) << "  heuristic" << std::setw(10) << "ms"
          << "speedup\n";
      for (size_t i = 0; i < outcomes.size(); ++i) {
        const TuneOutcome& o = outcomes[i];
        const TuneShape& s = shapes[i];
        std::string shape = std::to_string(s.batch) + "x" + std::to_string(s.heads) + "x" + std::to_string(s.seq_q) +
                            "x" + std::to_string(s.seq_kv);
        out << std::setw(22) << shape << std::setw(34) << o.key.bucket.str();
        if (o.result.measured) {
          const Measurement& m = o.result.best_m;
          out << std::setw(18) << o.result.best.str() << std::setw(20)
              << (ms3(m.median_ms) + " [" + ms3(m.p20_ms) + "," + ms3(m.p80_ms) + "]");
        } else {
          out << std::setw(18) << "(none worked)" << std::setw(20) << "-";
        }
        out << "  " << std::setw(18) << o.heuristic.str() << std::setw(10)
            << (o.heuristic_m ? ms3(o.heuristic_m->median_ms) : std::string("-"));
        if (o.result.measured && o.heuristic_m) {
          char r[32];
          std::snprintf(r, sizeof r, "%.2fx", o.heuristic_m->median_ms / o.result.best_m.median_ms);
          out << r;
        } else {
          out << "-";
        }
        out << (o.result.measured && !o.stored ? "  (not stored: " + o.store_error + ")" : "") << "\n";
      }
    }
    return all_ok ? 0 : 1;
  } catch (const Error& e) {
    const bool user = e.kind() == ErrorKind::spec || e.kind() == ErrorKind::usage;
    err << "flashjit tune: " << e.what() << "\n";
    if (e.kind() == ErrorKind::no_gpu) return 69;
    if (e.kind() == ErrorKind::cuda) return 1;
    return user ? 2 : 70;
  } catch (const std::exception& e) {
    err << "flashjit tune: internal error: " << e.what()
        << "\nThis is a flashjit bug; please report it with the command line and FLASHJIT_LOG=debug output.\n";
    return 70;
  }
}

// ---- KernelDispatch --------------------------------------------------------------------------------

struct KernelDispatch::Loaded {
  std::shared_ptr<Context> ctx;
  CompiledModule m;
  ~Loaded() { unload_module(*ctx, m.loaded); }
};

KernelDispatch::KernelDispatch(std::shared_ptr<Context> ctx, AttentionSpec spec, CompileOptions options,
                               DispatchOptions dispatch, const CompiledKernel* base, const LoadedModule* base_loaded)
    : ctx_(std::move(ctx)),
      spec_(std::move(spec)),
      options_(std::move(options)),
      dispatch_(std::move(dispatch)),
      mode_(tune_mode(dispatch_.autotune)),
      base_(base),
      base_loaded_(base_loaded) {
  spec_hash_ = tuning_spec_hash(spec_);
  if (options_.config) base_why_ = "given by the caller";
  else if (mode_ == TuneMode::off) base_why_ = base_->config_reason + " (autotune off)";
}

KernelDispatch::~KernelDispatch() = default;

KernelDispatch::Choice KernelDispatch::select(const ForwardArgs& args) const {
  // A given config, or autotune off: always the base kernel, no lookup, no lock.
  if (!base_why_.empty()) return {base_, base_loaded_, &base_why_};
  const autotune::TuningKey key{spec_hash_, autotune::ShapeBucket::of(args.batch, args.heads_q, args.seq_q, args.seq_kv,
                                                                       spec_.head_dim_qk, spec_.head_dim_v)};
  const std::string bucket = key.bucket.str();
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (auto it = buckets_.find(bucket); it != buckets_.end()) return it->second;
  }
  std::lock_guard<std::mutex> one_at_a_time(tune_mu_);
  {
    std::shared_lock<std::shared_mutex> lock(mu_);
    if (auto it = buckets_.find(bucket); it != buckets_.end()) return it->second;
  }
  return choose(args, key);
}

KernelDispatch::Choice KernelDispatch::choose(const ForwardArgs& args, const autotune::TuningKey& key) const {
  const std::string bucket = key.bucket.str();
  const DeviceInfo& info = ctx_->info;
  TileConfig config = base_->config;
  std::string why;
  bool memoise = true;
  if (stream_capturing(*ctx_, args.stream)) {
    // Tuning synchronises and launches on other streams, and loading a tuned kernel's module may
    // synchronise: either would invalidate the caller's capture (CUDA Programming Guide, "Prohibited
    // and Unhandled Operations"). This call runs the already loaded heuristic kernel; the bucket
    // stays undecided, so the next call outside a capture decides it.
    why = base_->config_reason + "; bucket " + bucket + " not decided: the stream is capturing a CUDA graph "
          "(run one call before capturing, or `flashjit tune`)";
    log::warn("autotune: " + why);
    memoise = false;
  } else if (std::optional<autotune::TuningEntry> e = lookup_tuning(info, spec_, key)) {
    config = e->best;
    why = "tuned " + e->date + " (" + e->mode + ", " + ms3(e->median_ms) + " ms median for bucket " + bucket + ")";
  } else if (dispatch_.tune_on_first_use) {
    try {
      ContextGuard guard(*ctx_);
      // The caller's tensors feed the mask: let the work that produces them finish first.
      cu::check(cu::driver().cuStreamSynchronize(static_cast<cu::CUstream>(args.stream)), "cuStreamSynchronize");
      Runtime runtime = Runtime::create(info.ordinal);  // this context: it is current here
      TuneJob job;
      job.spec = spec_;
      job.batch = args.batch, job.heads_q = args.heads_q, job.heads_kv = args.heads_kv;
      job.seq_q = args.seq_q, job.seq_kv = args.seq_kv;
      job.mode = mode_;
      job.deadline_s = dispatch_.tune_deadline_s;
      job.progress = &std::cerr;
      job.params = args.params;
      job.buffers = args.buffers;
      log::info("autotune on first use of bucket " + bucket + " (FLASHJIT_AUTOTUNE=" + autotune::tune_mode_name(mode_) +
                ")");
      TuneOutcome o = tune_in(runtime, *ctx_, job);
      if (o.result.measured) {
        config = o.result.best;
        why = "tuned " + o.date + " (" + autotune::tune_mode_name(mode_) + " now, " + ms3(o.result.best_m.median_ms) +
              " ms median for bucket " + bucket + ")";
      } else {
        why = base_->config_reason + "; tuning found no working config for bucket " + bucket + ": " + o.result.summary;
        log::warn("autotune: " + why);
      }
    } catch (const std::exception& e) {
      why = base_->config_reason + "; tuning bucket " + bucket + " failed: " + e.what();
      log::warn("autotune: " + why);
    }
  } else {
    why = base_->config_reason + "; no stored tuning for bucket " + bucket + " and tune_on_first_use is off";
  }

  Choice c{base_, base_loaded_, nullptr};
  if (!autotune::same_config(config, base_->config)) {
    const std::string name = config.str();
    std::unique_lock<std::shared_mutex> lock(mu_, std::defer_lock);
    auto it = modules_.find(name);
    if (it == modules_.end()) {
      try {
        CompileOptions o = options_;
        o.config = config;
        auto l = std::make_unique<Loaded>();
        l->ctx = ctx_;
        l->m = compile_and_load(*ctx_, spec_, o);
        l->m.compiled.config_reason = "tuned";
        lock.lock();
        it = modules_.emplace(name, std::move(l)).first;
        lock.unlock();
      } catch (const std::exception& e) {
        why = base_->config_reason + "; the tuned config " + name + " could not be loaded: " + e.what();
        log::warn("autotune: " + why);
      }
    }
    if (it != modules_.end()) c = {&it->second->m.compiled, &it->second->m.loaded, nullptr};
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (!memoise) {
    c.why = &*unmemoised_whys_.insert(why).first;  // stable storage; the bucket is decided later
    return c;
  }
  c.why = &whys_.emplace(bucket, why).first->second;
  buckets_.emplace(bucket, c);
  log::info("bucket " + bucket + " of " + base_->key + ": config " + c.compiled->config.str() + " (" + why + ")");
  return c;
}

}  // namespace flashjit::rt

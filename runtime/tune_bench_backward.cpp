// The backward's autotuning bench: each input set gets O and LSE from one forward (the forward's
// heuristic kernel), then every candidate backward config is loaded, checked against the first
// measured config's dQ, dK, dV on set 0 (poisoned before each candidate), and timed as
// Kernel::backward runs it (block maps, D pre-pass, dK/dV and dQ kernels).
#include <algorithm>
#include <cmath>
#include <deque>

#include "flashjit/reference.hpp"
#include "runtime/backward.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/timing.hpp"
#include "runtime/tune_bench.hpp"
#include "support/log.hpp"

namespace flashjit::rt {

namespace {

// Two correct backward configs sum each gradient element over the same products in another order
// (fp32) and round once to dtype; P and dS are rounded alike in every config. They differ by about
// one ulp of the element (bf16: 2^-8 relative), plus what cancellation exposes, bounded here by a
// fraction of the tensor's RMS. A config that drops one 64-row query tile of 4096 moves dK and dV
// by ~1/8 of their RMS: far outside this bound.
constexpr double kRelativeBound = 1.0 / 64;  // 4 bf16 ulps
constexpr double kRmsFloor = 1.0 / 128;
constexpr size_t kMaxChecked = size_t(1) << 22;  // elements per gradient, sampled with an odd stride

class BackwardTuneBench final : public CandidateBench {
 public:
  BackwardTuneBench(const Runtime& runtime, std::shared_ptr<Context> ctx, const TuneJob& job)
      : CandidateBench(std::move(ctx), job), runtime_(runtime) {}

  std::optional<std::string> prune(const TileConfig& c) override {
    const DeviceInfo& info = ctx_->info;
    BackwardPlan plan;
    try {
      plan = plan_backward(job_.source.spec, c, job_.source.target);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    for (const BackwardPass* k : {&plan.kv, &plan.q})
      if (k->shared_bytes > info.shared_per_block_optin)
        return std::string(k == &plan.kv ? "the dK/dV" : "the dQ") + " kernel needs " +
               std::to_string(k->shared_bytes) + " B of shared memory; " + info.name + " allows " +
               std::to_string(info.shared_per_block_optin) + " per block";
    std::string why;
    const BackwardModule* m = module(c, &why);
    if (!m) return "does not compile: " + why;
    if (auto p = prune_loaded(m->registers, m->spill_bytes, m->plan.kv.threads, "the dK/dV kernel ")) return p;
    return prune_loaded(m->dq_registers, m->dq_spill_bytes, m->plan.q.threads, "the dQ kernel ");
  }

  std::string fingerprint(const TileConfig& c) override {
    std::string why;
    const BackwardModule* m = module(c, &why);
    if (!m) throw Error(ErrorKind::compile, why);
    // Equal PTX (entry names blanked) → equal binaries on this driver.
    return binary_fingerprint(m->compiled.ptx, m->compiled);
  }

 private:
  std::optional<std::string> load(const TileConfig& c) override {
    std::string why;
    current_ = module(c, &why);
    if (!current_) return why;
    return std::nullopt;
  }

  void poison() override {
    for (DeviceBuffer& g : grads_) g.fill_bytes(0xFF);  // NaN in fp16 and bf16
  }

  void launch(int r) override {
    const size_t s = size_t(r) % sets_.size();
    launch_backward(*current_, *job_.source.spec, sets_[s], launches_[s]);
  }

  const BackwardModule* module(const TileConfig& c, std::string* why) {
    auto it = modules_.find(c.str());
    if (it == modules_.end()) {
      Built b;
      try {
        b.module = load_backward(ctx_, job_.source, c);
      } catch (const Error& e) {
        b.error = e.what();
      }
      it = modules_.emplace(c.str(), std::move(b)).first;
    }
    if (it->second.module) return it->second.module.get();
    *why = it->second.error;
    return nullptr;
  }

  // Every gradient of set 0 against the first measured config's (sampled when huge).
  std::optional<std::string> check(const TileConfig& c) override {
    const DType dtype = job_.source.spec->spec.dtype;
    const char* names[3] = {"dQ", "dK", "dV"};
    std::vector<std::vector<float>> got(3);
    for (int t = 0; t < 3; ++t) {
      std::vector<uint16_t> all(grads_[t].size() / 2);
      grads_[t].download(all.data(), all.size() * 2);
      const size_t stride = all.size() <= kMaxChecked ? 1 : (all.size() / kMaxChecked) | 1;
      for (size_t i = 0; i < all.size(); i += stride) {
        const float v = ref::from_half_bits(all[i], dtype);
        if (!std::isfinite(v)) return std::string("wrong output: non-finite ") + names[t];
        got[t].push_back(v);
      }
    }
    if (baseline_.empty()) {
      baseline_ = std::move(got);
      baseline_name_ = c.str();
      return std::nullopt;
    }
    for (int t = 0; t < 3; ++t) {
      double sq = 0;
      for (float b : baseline_[t]) sq += double(b) * b;
      const double floor = kRmsFloor * std::sqrt(sq / double(std::max<size_t>(baseline_[t].size(), 1)));
      for (size_t i = 0; i < got[t].size(); ++i) {
        const double b = baseline_[t][i], diff = std::fabs(got[t][i] - b);
        if (diff > kRelativeBound * std::fabs(b) + floor)
          return std::string("wrong output: ") + names[t] + " differs from " + baseline_name_ + "'s by " +
                 format_ms(diff) + " where it is " + format_ms(b) + " (allowed " +
                 format_ms(kRelativeBound * std::fabs(b) + floor) + ")";
      }
    }
    return std::nullopt;
  }

  void setup() override {
    if (!sets_.empty()) return;
    const ProblemShape& j = job_.shape;
    const AttentionSpec& spec = job_.source.spec->spec;
    const int64_t dqk = spec.head_dim_qk, dv = spec.head_dim_v;
    const TensorSizes n = TensorSizes::of(job_);
    const size_t nq = n.q, nk = n.k, nv = n.v, no = n.o, nlse = n.lse;
    const size_t n_sets = input_set_count(4 * (nq + nk + nv + no) + 4 * nlse, ctx_->info);
    // The forward that produces O and LSE: its heuristic config, never tuned here.
    KernelSource fwd_source = job_.source;
    fwd_source.backward_config.reset();
    forward_ = compile_kernel(ctx_, fwd_source, std::nullopt, DispatchOptions{"off", false, std::nullopt, true});
    const std::vector<BufferArg> tensors = job_tensors(runtime_, job_, keep_);
    auto upload = [&](size_t n, uint64_t seed) {
      DeviceBuffer b = runtime_.alloc(n * 2);
      b.upload(random_halves(n, spec.dtype, seed).data(), n * 2);
      return b;
    };
    for (size_t s = 0; s < n_sets; ++s) {
      const uint64_t seed = 0x9E3779B97F4A7C15ull * (s + 1);
      DeviceBuffer q = upload(nq, seed + 1), k = upload(nk, seed + 2), v = upload(nv, seed + 3),
                   d_o = upload(no, seed + 4), o = runtime_.alloc(no * 2), lse = runtime_.alloc(nlse * 4),
                   dq = runtime_.alloc(nq * 2), dk = runtime_.alloc(nk * 2), dvb = runtime_.alloc(nv * 2);
      BackwardArgs a;
      static_cast<ProblemShape&>(a) = j;
      a.q = bshd(q.data(), j.seq_q, j.heads_q, dqk);
      a.k = bshd(k.data(), j.seq_kv, j.heads_kv, dqk);
      a.v = bshd(v.data(), j.seq_kv, j.heads_kv, dv);
      a.o = bshd(o.data(), j.seq_q, j.heads_q, dv);
      a.d_o = bshd(d_o.data(), j.seq_q, j.heads_q, dv);
      a.dq = bshd(dq.data(), j.seq_q, j.heads_q, dqk);
      a.dk = bshd(dk.data(), j.seq_kv, j.heads_kv, dqk);
      a.dv = bshd(dvb.data(), j.seq_kv, j.heads_kv, dv);
      a.lse = static_cast<const float*>(lse.data());
      a.params = job_.params;
      a.buffers = tensors;
      ForwardArgs f;
      static_cast<ProblemShape&>(f) = j;
      f.q = a.q, f.k = a.k, f.v = a.v, f.o = a.o;
      f.lse = static_cast<float*>(lse.data());
      f.params = a.params;
      f.buffers = tensors;
      forward_->forward(f);
      sets_.push_back(a);
      pack_backward(*job_.source.spec, sets_.back(), launches_.emplace_back());  // must not move: a deque
      if (s == 0)
        for (DeviceBuffer* g : {&dq, &dk, &dvb}) grads_.push_back(std::move(*g));
      for (DeviceBuffer* b : {&q, &k, &v, &d_o, &o, &lse, &dq, &dk, &dvb})
        if (b->data()) keep_.push_back(std::move(*b));
    }
    cu::check(cu::driver().cuCtxSynchronize(), "cuCtxSynchronize (the tuner's forward failed)");
    flush_ = alloc_l2_flush(runtime_, ctx_->info);
    log::debug("autotune (backward): " + std::to_string(n_sets) + " input sets");
  }

  struct Built {
    std::shared_ptr<const BackwardModule> module;
    std::string error;
  };
  const Runtime& runtime_;
  std::map<std::string, Built> modules_;
  const BackwardModule* current_ = nullptr;  // load()'s
  std::optional<Kernel> forward_;
  std::vector<BackwardArgs> sets_;
  std::deque<BackwardLaunch> launches_;  // pack_backward's slots point into each element
  std::vector<DeviceBuffer> grads_;      // set 0's dQ, dK, dV
  std::vector<DeviceBuffer> keep_;       // every other buffer
  std::vector<std::vector<float>> baseline_;
  std::string baseline_name_;
};

}  // namespace

std::unique_ptr<CandidateBench> make_backward_bench(const Runtime& runtime, std::shared_ptr<Context> ctx,
                                                    const TuneJob& job) {
  return std::make_unique<BackwardTuneBench>(runtime, std::move(ctx), job);
}

}  // namespace flashjit::rt

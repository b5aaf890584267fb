#include "runtime/tune_bench.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include "flashjit/reference.hpp"
#include "runtime/driver.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/timing.hpp"
#include "support/log.hpp"

namespace flashjit::rt {

namespace {

// Every config's output on input set 0 is judged against the fp64 reference under the tests' rule
// (ref::judge: error ≤ 2 × the same-dtype implementation's + a floor, no NaN anywhere, LSE within
// 1e-3): a fast wrong kernel must never win. A comparison with another config cannot do that: a
// kernel that drops key tile 0 for later rows is 0.027 from a correct one at s=2048, d=128. The
// output and LSE are poisoned with NaN before each config runs, so an element a config does not
// write cannot keep a previous config's value.
constexpr size_t kSet0Output = 3, kSet0Lse = 4;  // buffers_ holds q, k, v, o, lse of each set in turn
// Rows checked: every row of a few (batch, head) pairs when seq_q is small, else their first and
// last 16 rows and an even spread (ref::pick_rows), up to this many per pair; the reference's cost
// then stays near seconds at seq 8192.
constexpr int64_t kCheckedRowsPerHead = 512;

// The rows of the first, middle and last (batch, head) pairs that the output check compares.
std::vector<ref::RowId> checked_rows(const ref::Problem& p) {
  ref::Problem one;  // the shape only: pick_rows reads no data
  static_cast<ProblemShape&>(one) = p;
  one.batch = one.heads_q = 1;
  const std::vector<ref::RowId> per_head = ref::pick_rows(one, kCheckedRowsPerHead);
  std::vector<std::pair<int64_t, int64_t>> heads = {{0, 0}, {p.batch / 2, p.heads_q / 2}, {p.batch - 1, p.heads_q - 1}};
  std::sort(heads.begin(), heads.end());
  heads.erase(std::unique(heads.begin(), heads.end()), heads.end());
  std::vector<ref::RowId> rows;
  for (auto [b, h] : heads)
    for (const ref::RowId& r : per_head) rows.push_back({b, h, r.q});
  return rows;
}

}  // namespace

std::optional<std::string> prune_loaded(int registers, int spill_bytes, int threads, const char* what) {
  if (spill_bytes > kMaxTunedSpillBytes)
    return std::string(what) + "spills " + std::to_string(spill_bytes) + " bytes (more than the " +
           std::to_string(kMaxTunedSpillBytes) + " a tuned config may)";
  if (int64_t(registers) * threads > 65536)
    return std::string(what) + std::to_string(registers) + " registers × " + std::to_string(threads) +
           " threads exceed the 65536 registers of an SM";
  return std::nullopt;
}

TensorSizes TensorSizes::of(const TuneJob& job) {
  const ProblemShape& j = job.shape;
  const int64_t dqk = job.source.spec->spec.head_dim_qk, dv = job.source.spec->spec.head_dim_v;
  return {size_t(j.batch * j.seq_q * j.heads_q * dqk), size_t(j.batch * j.seq_kv * j.heads_kv * dqk),
          size_t(j.batch * j.seq_kv * j.heads_kv * dv), size_t(j.batch * j.seq_q * j.heads_q * dv),
          size_t(j.batch * j.heads_q * j.seq_q)};
}

size_t input_set_count(size_t set_bytes, const DeviceInfo& info) {
  const size_t l2 = size_t(std::max(info.l2_bytes, 1 << 20));
  size_t n_sets = std::clamp<size_t>(l2 / std::max<size_t>(set_bytes, 1) + 2, 2, 32);
  while (n_sets > 2 && n_sets * set_bytes > (size_t(8) << 30)) --n_sets;
  return n_sets;
}

std::vector<uint16_t> random_halves(size_t n, DType dtype, uint64_t seed) {
  std::vector<uint16_t> host(n);
  uint64_t x = seed | 1;
  for (auto& h : host) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    h = ref::to_half_bits(float(double(x >> 11) / double(1ull << 53) * 3.4641 - 1.7320), dtype);
  }
  return host;
}

std::vector<BufferArg> job_tensors(const Runtime& runtime, const TuneJob& job, std::vector<DeviceBuffer>& keep) {
  const AttentionSpec& spec = job.source.spec->spec;
  std::vector<BufferArg> tensors = job.buffers;
  if (!tensors.empty() || spec.tensors.empty()) return tensors;
  ref::Problem p;
  p.spec = spec;
  static_cast<ProblemShape&>(p) = job.shape;
  ref::fill_spec_tensors(p, 1);
  for (const ref::HostTensor& t : p.tensors) {
    const bool i32 = !t.i32.empty() || t.f32.empty();
    const size_t n = i32 ? t.i32.size() : t.f32.size();
    DeviceBuffer b = runtime.alloc(n * 4);
    b.upload(i32 ? static_cast<const void*>(t.i32.data()) : t.f32.data(), n * 4);
    tensors.push_back({t.name, b.data(), int64_t(n)});
    keep.push_back(std::move(b));
  }
  return tensors;
}

PagedLayout PagedLayout::of(const ProblemShape& s, int page_size) {
  PagedLayout l;
  l.page_size = page_size;
  l.per_seq = (s.seq_kv + page_size - 1) / page_size;
  const int64_t pages = s.batch * l.per_seq;
  l.table.resize(size_t(pages));
  for (int64_t i = 0; i < pages; ++i) l.table[size_t(i)] = int32_t(i);
  uint64_t x = 0x2545F4914F6CDD1Dull;  // a fixed shuffle (Fisher–Yates): every tuning sees the same one
  for (int64_t i = pages - 1; i > 0; --i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::swap(l.table[size_t(i)], l.table[size_t(x % uint64_t(i + 1))]);
  }
  return l;
}

std::vector<uint16_t> PagedLayout::pool(const std::vector<uint16_t>& rows, const ProblemShape& s, int64_t dim) const {
  const int64_t row = s.heads_kv * dim;  // elements of one key position (all K/V heads)
  std::vector<uint16_t> out(size_t(s.batch * per_seq * page_size * row), 0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t n = 0; n < s.seq_kv; ++n) {
      const int64_t page = table[size_t(b * per_seq + n / page_size)];
      std::copy_n(rows.begin() + (b * s.seq_kv + n) * row, row, out.begin() + (page * page_size + n % page_size) * row);
    }
  return out;
}

DeviceBuffer alloc_l2_flush(const Runtime& runtime, const DeviceInfo& info) {
  return runtime.alloc(std::max<size_t>(2 * size_t(std::max(info.l2_bytes, 1 << 20)), 8 << 20));
}

CandidateBench::CandidateBench(std::shared_ptr<Context> ctx, const TuneJob& job) : ctx_(std::move(ctx)), job_(job) {}

CandidateBench::~CandidateBench() = default;

autotune::Measurement CandidateBench::measure(const TileConfig& c) {
  autotune::Measurement m;
  if (std::optional<std::string> why = load(c)) {
    m.failure_reason = "does not compile: " + *why;
    return m;
  }
  try {
    ContextGuard guard(*ctx_);
    setup();
    const cu::Driver& d = cu::driver();
    if (!timer_) timer_ = std::make_unique<EventTimer>(*ctx_);
    poison();
    for (int i = 0; i < 3; ++i) launch(i);
    cu::check(d.cuCtxSynchronize(), "cuCtxSynchronize (warm-up launch failed)");
    if (std::optional<std::string> wrong = check(c)) {
      m.failure_reason = *wrong;
      return m;
    }
    const int reps = job_.reps > 0 ? job_.reps : job_.mode == autotune::TuneMode::full ? 20 : 10;
    std::vector<float> ms;
    for (int r = 0; r < reps; ++r) {
      // Evict the inputs from L2: the next launch reads them from HBM, as in a real model step.
      cu::check(d.cuMemsetD8(reinterpret_cast<cu::CUdeviceptr>(flush_.data()), static_cast<unsigned char>(r),
                             flush_.size()),
                "cuMemsetD8(L2 flush)");
      ms.push_back(timer_->time(nullptr, [&] { launch(r); }));
      if (r == 2 && ms[0] > 200) break;  // a very slow config: three samples tell enough
    }
    std::sort(ms.begin(), ms.end());
    m.ok = true;
    m.median_ms = quantile(ms, 0.5);
    m.p20_ms = quantile(ms, 0.2);
    m.p80_ms = quantile(ms, 0.8);
  } catch (const Error& e) {
    m = autotune::Measurement{};
    m.failure_reason = std::string("launch failed: ") + e.what();
  }
  return m;
}

TuneBench::TuneBench(const Runtime& runtime, std::shared_ptr<Context> ctx, const TuneJob& job)
    : CandidateBench(std::move(ctx), job), runtime_(runtime) {}

const Kernel* TuneBench::kernel(const TileConfig& c, std::string* why) {
  const std::string name = c.str();
  auto it = kernels_.find(name);
  if (it == kernels_.end()) {
    Built b;
    try {
      b.kernel = compile_kernel(ctx_, job_.source, c, DispatchOptions{"off", false, std::nullopt, true});
    } catch (const Error& e) {
      b.error = e.what();
    }
    it = kernels_.emplace(name, std::move(b)).first;
  }
  if (it->second.kernel) return &*it->second.kernel;
  *why = it->second.error;
  return nullptr;
}

std::string TuneBench::fingerprint(const TileConfig& c) {
  std::string why;
  const Kernel* k = kernel(c, &why);
  if (!k) throw Error(ErrorKind::compile, why);
  const CompiledKernel& ck = k->compiled();
  const StageOptions& stages = job_.source.stages;
  if (stages.override_dir.empty() && stages.dump_dir.empty()) {
    // The cubin, from the compile cache the compile just filled (a file read, no LLVM).
    KernelRequest request;
    request.target = job_.source.target;
    request.config = c;
    KernelCacheSettings s;
    s.driver_version = ctx_->info.driver_version;
    s.assembler = assembler(s.driver_version).id();
    KernelBuild b = build_kernel(plan_kernel(job_.source.spec, request), stages, s, nullptr);
    if (!b.cubin.empty()) return binary_fingerprint(b.cubin, b.compiled);
  }
  // No cached cubin: the PTX decides the cubin (same driver), so equal PTX means equal binaries.
  return binary_fingerprint(ck.ptx, ck);
}

std::optional<std::string> TuneBench::prune(const TileConfig& c) {
  const DeviceInfo& info = ctx_->info;
  LaunchFacts facts;
  try {
    facts = find_template("attention_fwd").plan(job_.source.spec, c, job_.source.target)->launch();
  } catch (const Error& e) {
    return std::string(e.what());
  }
  if (facts.shared_bytes > info.shared_per_block_optin)
    return "needs " + std::to_string(facts.shared_bytes) + " B of shared memory; " + info.name + " allows " +
           std::to_string(info.shared_per_block_optin) + " per block";
  std::string why;
  const Kernel* k = kernel(c, &why);
  if (!k) return "does not compile: " + why;
  return prune_loaded(k->registers(), k->spill_bytes(), facts.threads, "");
}

std::optional<std::string> TuneBench::load(const TileConfig& c) {
  std::string why;
  current_ = kernel(c, &why);
  if (!current_) return why;
  return std::nullopt;
}

void TuneBench::poison() {  // NaN in fp16, bf16 and fp32
  buffers_[kSet0Output].fill_bytes(0xFF);
  buffers_[kSet0Lse].fill_bytes(0xFF);
}

void TuneBench::launch(int r) {
  ForwardArgs& a = sets_[size_t(r) % sets_.size()];
  a.num_splits = splits_;
  current_->forward(a);
}

std::optional<std::string> TuneBench::check(const TileConfig&) {
  std::vector<uint16_t> out(size_t(problem_.batch * problem_.seq_q * problem_.heads_q * problem_.d_v()));
  std::vector<float> lse(size_t(problem_.batch * problem_.heads_q * problem_.seq_q));
  buffers_[kSet0Output].download(out.data(), out.size() * 2);
  buffers_[kSet0Lse].download(lse.data(), lse.size() * 4);
  const ref::Verdict v = ref::judge(problem_, expected_, out, &lse);
  if (v.ok) return std::nullopt;
  return "wrong output against the fp64 reference: " + v.message;
}

void TuneBench::host_problem() {
  const AttentionSpec& spec = job_.source.spec->spec;
  ref::Problem& p = problem_;
  p.spec = spec;
  static_cast<ProblemShape&>(p) = job_.shape;
  p.params = job_.params;
  // Q, K and V independent (a kernel that confused them could pass on equal ones). Every input
  // set holds these values.
  p.q = random_halves(size_t(p.batch * p.seq_q * p.heads_q * p.d_qk()), spec.dtype, 0x9E3779B97F4A7C15ull);
  p.k = random_halves(size_t(p.batch * p.seq_kv * p.heads_kv * p.d_qk()), spec.dtype, 0xD1B54A32D192ED03ull);
  p.v = random_halves(size_t(p.batch * p.seq_kv * p.heads_kv * p.d_v()), spec.dtype, 0x8CB92BA72F3D8DD7ull);
  // The spec's tensors: random contents of the declared shapes, or the caller's read back (of
  // exactly those sizes: the reference reads them by the declared extents).
  ref::fill_spec_tensors(p, 1);
  if (!job_.buffers.empty())
    for (ref::HostTensor& h : p.tensors) {
      auto it = std::find_if(job_.buffers.begin(), job_.buffers.end(), [&](const BufferArg& b) { return b.name == h.name; });
      const bool i32 = !h.i32.empty() || h.f32.empty();
      const size_t n = i32 ? h.i32.size() : h.f32.size();
      if (it == job_.buffers.end() || size_t(it->numel) != n)
        throw Error(ErrorKind::usage, "autotune: the spec's tensor '" + h.name + "' needs a buffer of " + std::to_string(n) +
                                          " elements");
      void* host = i32 ? static_cast<void*>(h.i32.data()) : static_cast<void*>(h.f32.data());
      cu::check(cu::driver().cuMemcpyDtoH(host, reinterpret_cast<cu::CUdeviceptr>(it->data), n * 4),
                "cuMemcpyDtoH (reading a spec tensor for the output check)");
    }
  expected_ = ref::expect_rows(p, checked_rows(p));
}

void TuneBench::setup() {
  if (!sets_.empty()) return;
  host_problem();
  const ProblemShape& j = job_.shape;
  const AttentionSpec& spec = job_.source.spec->spec;
  const int64_t dqk = spec.head_dim_qk, dv = spec.head_dim_v;
  const TensorSizes n = TensorSizes::of(job_);
  // Paged: K and V as page pools in the order of a shuffled block table, one table for every set.
  std::optional<PagedLayout> paged;
  std::vector<uint16_t> pool_k, pool_v;
  DeviceBuffer table;
  if (job_.page_size > 0) {
    paged = PagedLayout::of(j, job_.page_size);
    pool_k = paged->pool(problem_.k, j, dqk), pool_v = paged->pool(problem_.v, j, dv);
    table = runtime_.alloc(paged->table.size() * 4);
    table.upload(paged->table.data(), paged->table.size() * 4);
  }
  const size_t nq = n.q, nk = paged ? pool_k.size() : n.k, nv = paged ? pool_v.size() : n.v, no = n.o, nlse = n.lse;
  const uint16_t* k_host = paged ? pool_k.data() : problem_.k.data();
  const uint16_t* v_host = paged ? pool_v.data() : problem_.v.data();
  const size_t set_bytes = 2 * (nq + nk + nv + no) + 4 * nlse;
  const size_t n_sets = input_set_count(set_bytes, ctx_->info);
  for (size_t s = 0; s < n_sets; ++s) {
    DeviceBuffer q = runtime_.alloc(nq * 2), k = runtime_.alloc(nk * 2), v = runtime_.alloc(nv * 2),
                 o = runtime_.alloc(no * 2), lse = runtime_.alloc(nlse * 4);
    q.upload(problem_.q.data(), nq * 2);
    k.upload(k_host, nk * 2);
    v.upload(v_host, nv * 2);
    ForwardArgs a;
    static_cast<ProblemShape&>(a) = j;
    a.q = bshd(q.data(), j.seq_q, j.heads_q, dqk);
    const int64_t kv_rows = paged ? paged->page_size : j.seq_kv;  // a pool's "sequence" is a page
    a.k = bshd(k.data(), kv_rows, j.heads_kv, dqk);
    a.v = bshd(v.data(), kv_rows, j.heads_kv, dv);
    if (paged) {
      a.block_table = static_cast<int32_t*>(table.data());
      a.page_size = paged->page_size;
      a.max_pages_per_seq = paged->per_seq;
    }
    a.o = bshd(o.data(), j.seq_q, j.heads_q, dv);
    a.lse = static_cast<float*>(lse.data());
    a.params = job_.params;
    sets_.push_back(a);
    for (DeviceBuffer* b : {&q, &k, &v, &o, &lse}) buffers_.push_back(std::move(*b));  // set 0's o: kSet0Output
  }
  // The caller's tensors, else the random ones the reference reads.
  std::vector<BufferArg> tensors = job_.buffers;
  if (tensors.empty())
    for (const ref::HostTensor& t : problem_.tensors) {
      const bool i32 = !t.i32.empty() || t.f32.empty();
      const size_t n_el = i32 ? t.i32.size() : t.f32.size();
      DeviceBuffer b = runtime_.alloc(n_el * 4);
      b.upload(i32 ? static_cast<const void*>(t.i32.data()) : t.f32.data(), n_el * 4);
      tensors.push_back({t.name, b.data(), int64_t(n_el)});
      buffers_.push_back(std::move(b));
    }
  for (ForwardArgs& a : sets_) a.buffers = tensors;
  if (paged) buffers_.push_back(std::move(table));
  flush_ = alloc_l2_flush(runtime_, ctx_->info);
  log::debug("autotune: " + std::to_string(n_sets) + " input sets of " + std::to_string(set_bytes) +
             " bytes, L2 flush " + std::to_string(flush_.size()) + " bytes");
}

}  // namespace flashjit::rt

#include "runtime/launch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "compiler/dsl/interval.hpp"
#include "compiler/spec_bridge.hpp"
#include "templates/fwd/plan.hpp"

namespace flashjit::rt {

std::vector<uint64_t> block_map_key(const ProblemShape& s, std::initializer_list<int> tile_sizes,
                                    const ForwardLaunch& launch, size_t params) {
  std::vector<uint64_t> key = {uint64_t(s.batch), uint64_t(s.seq_q), uint64_t(s.seq_kv), uint64_t(s.heads_q),
                               uint64_t(s.heads_kv)};
  for (int t : tile_sizes) key.push_back(uint64_t(t));
  key.insert(key.end(), launch.extra.begin(), launch.extra.begin() + params);
  return key;
}

namespace {

// The call being checked ("forward" or "backward"), for messages.
thread_local const char* g_call = "forward";
[[noreturn]] void bad(const std::string& what) { throw Error(ErrorKind::usage, std::string(g_call) + ": " + what); }

struct CallName {
  const char* saved;
  explicit CallName(const char* name) : saved(g_call) { g_call = name; }
  ~CallName() { g_call = saved; }
};


void check_tensor(const char* name, const Tensor& t) {
  if (!t.data) bad(std::string(name) + ".data is null");
  // Rows move as 16-byte vectors (cp.async 16): base and every row start must be 16-byte aligned.
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    bad(std::string(name) + ".data is not 16-byte aligned; flashjit requires 16-byte aligned tensors (no silent copies)");
  if (t.stride[3] != 1) bad(std::string(name) + ".stride[3] (head dim) is " + std::to_string(t.stride[3]) + "; it must be 1");
  static const char* dims[] = {"batch", "seq", "heads"};
  for (int i = 0; i < 3; ++i)
    if (t.stride[i] < 0 || t.stride[i] % 8 != 0)
      bad(std::string(name) + ".stride[" + std::to_string(i) + "] (" + dims[i] + ") is " + std::to_string(t.stride[i]) +
          "; it must be a non-negative multiple of 8 elements (16 bytes) so rows stay 16-byte aligned");
}


// a * b and a + b in int64, or a usage error naming `what`: sizes come from the caller, and a
// wrapped product would pass every later check (GCC/Clang __builtin_*_overflow).
int64_t mul_checked(int64_t a, int64_t b, const std::string& what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) bad(what + " overflows int64 (" + std::to_string(a) + " * " + std::to_string(b) + ")");
  return r;
}
int64_t add_checked(int64_t a, int64_t b, const std::string& what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) bad(what + " overflows int64 (" + std::to_string(a) + " + " + std::to_string(b) + ")");
  return r;
}

// The elements a [batch, seq, heads, dim] view spans: (n_i - 1) * stride_i summed, plus dim; its
// addresses are computed in 64-bit by the kernels, so the whole span must fit int64.
void check_span(const char* name, const Tensor& t, int64_t batch, int64_t seq, int64_t heads, int64_t dim) {
  const std::string what = std::string(name) + "'s extent (sizes times strides)";
  int64_t span = dim;
  const int64_t n[3] = {batch, seq, heads};
  for (int i = 0; i < 3; ++i) span = add_checked(span, mul_checked(std::max<int64_t>(n[i] - 1, 0), t.stride[i], what), what);
}

// Extent of one tensor dimension at this launch.
int64_t extent_of(const dsl::Extent& d, const ForwardArgs& a) {
  return dsl::extent_size(d, launch_sizes(a));
}

// Packed sequences (ForwardArgs::cu_seqlens_*): what can be checked without reading the offsets,
// which live on the device (reading them would synchronise the stream).
void check_varlen(const AnalyzedSpec& analyzed, const ForwardArgs& a) {
  if (!a.cu_seqlens_q != !a.cu_seqlens_kv)
    bad(std::string("varlen needs both cu_seqlens_q and cu_seqlens_kv; ") + (a.cu_seqlens_q ? "cu_seqlens_kv" : "cu_seqlens_q") +
        " is null");
  if (reinterpret_cast<uintptr_t>(a.cu_seqlens_q) % 4 != 0 || reinterpret_cast<uintptr_t>(a.cu_seqlens_kv) % 4 != 0)
    bad("cu_seqlens_q and cu_seqlens_kv must be 4-byte aligned int32 arrays");
  if (a.max_seqlen_q < 0 || a.max_seqlen_q > a.seq_q)
    bad("max_seqlen_q is " + std::to_string(a.max_seqlen_q) + "; with varlen it must be in [0, seq_q = " +
        std::to_string(a.seq_q) + "] (seq_q is the total of the packed query tokens)");
  if (a.max_seqlen_kv < 0 || a.max_seqlen_kv > a.seq_kv)
    bad("max_seqlen_kv is " + std::to_string(a.max_seqlen_kv) + "; with varlen it must be in [0, seq_kv = " +
        std::to_string(a.seq_kv) + "] (seq_kv is " +
        (a.block_table ? "the most keys a sequence's pages hold" : "the total of the packed key tokens") + ")");
  if (std::optional<std::string> why = varlen_blocker(analyzed)) bad("varlen (cu_seqlens) is not possible: " + *why);
  if (a.block_map) bad("block_map cannot be combined with varlen (cu_seqlens)");
}

// A paged K/V cache (ForwardArgs::block_table): what the host can check (the table and the
// per-sequence counts live on the device).
void check_paged(const AnalyzedSpec& analyzed, const ForwardArgs& a) {
  if (!a.block_table) {
    if (a.page_size || a.max_pages_per_seq || a.seqused_kv)
      bad("page_size, max_pages_per_seq and seqused_kv need block_table (a paged K/V cache); block_table is null");
    return;
  }
  if (a.page_size <= 0 || a.page_size % 16 != 0 || a.page_size > (1 << 20))
    bad("page_size is " + std::to_string(a.page_size) + "; it must be a positive multiple of 16 (at most 2^20)");
  if (a.max_pages_per_seq <= 0 || a.max_pages_per_seq > std::numeric_limits<int32_t>::max())
    bad("max_pages_per_seq is " + std::to_string(a.max_pages_per_seq) + "; it must be in [1, 2^31 - 1]");
  if (a.seq_kv > a.max_pages_per_seq * a.page_size)
    bad("seq_kv " + std::to_string(a.seq_kv) + " exceeds max_pages_per_seq * page_size = " +
        std::to_string(a.max_pages_per_seq * a.page_size) + " keys a sequence's pages can hold");
  if (reinterpret_cast<uintptr_t>(a.block_table) % 4 != 0 || reinterpret_cast<uintptr_t>(a.seqused_kv) % 4 != 0)
    bad("block_table and seqused_kv must be 4-byte aligned int32 arrays");
  if (std::optional<std::string> why = varlen_blocker(analyzed)) bad("a paged K/V cache is not possible: " + *why);
  if (a.block_map) bad("block_map cannot be combined with a paged K/V cache");
}

std::string names_of(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& n : v) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

}  // namespace

int64_t checked_product(std::initializer_list<int64_t> factors, const std::string& what) {
  int64_t r = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(r, f, &r)) throw Error(ErrorKind::usage, what + " overflows int64");
  return r;
}

void pack_forward(const AnalyzedSpec& analyzed, const ForwardArgs& a, ForwardLaunch& out, bool both_ranges) {
  const dsl::Spec& spec = analyzed.dsl;
  constexpr int64_t kMaxGrid = 65535;  // gridDim.y/z limit (CUDA Programming Guide, Table 21)
  constexpr int64_t kMaxSeq = std::numeric_limits<int32_t>::max();
  if (a.batch < 0 || a.seq_q < 0 || a.seq_kv < 0) bad("batch, seq_q and seq_kv must be >= 0");
  if (a.heads_q <= 0 || a.heads_kv <= 0) bad("heads_q and heads_kv must be >= 1");
  if (a.heads_q % a.heads_kv != 0)
    bad("heads_q (" + std::to_string(a.heads_q) + ") must be a multiple of heads_kv (" + std::to_string(a.heads_kv) + ")");
  if (a.heads_q > kMaxGrid) bad("heads_q " + std::to_string(a.heads_q) + " exceeds 65535");
  if (a.batch > kMaxGrid) bad("batch " + std::to_string(a.batch) + " exceeds 65535");
  if (a.seq_q > kMaxSeq || a.seq_kv > kMaxSeq) bad("seq_q and seq_kv must be below 2^31");
  // The kernel folds the scale into one FFMA against the row max, which needs scale > 0.
  if (!std::isfinite(a.scale) || a.scale < 0) bad("scale must be finite and > 0 (0 selects 1/sqrt(d_qk))");
  check_tensor("q", a.q);
  check_tensor("k", a.k);
  check_tensor("v", a.v);
  check_tensor("o", a.o);
  const bool varlen = a.cu_seqlens_q || a.cu_seqlens_kv;
  check_paged(analyzed, a);
  if (varlen) check_varlen(analyzed, a);
  const int64_t spans = varlen ? 1 : a.batch;  // packed: one [total, heads, dim] tensor each
  check_span("q", a.q, spans, a.seq_q, a.heads_q, spec.head_dim_qk);
  if (!a.block_table) {  // a page pool's page count is not known here (nor its table's ids)
    check_span("k", a.k, spans, a.seq_kv, a.heads_kv, spec.head_dim_qk);
    check_span("v", a.v, spans, a.seq_kv, a.heads_kv, spec.head_dim_v);
  }
  check_span("o", a.o, spans, a.seq_q, a.heads_q, spec.head_dim_v);
  if (a.lse && reinterpret_cast<uintptr_t>(a.lse) % 4 != 0) bad("lse is not 4-byte aligned");
  if (a.num_splits < 0 || a.num_splits > kMaxSplits)
    bad("num_splits is " + std::to_string(a.num_splits) + "; it must be 0 (automatic), 1 (no split) or 2.." +
        std::to_string(kMaxSplits));

  ForwardParams& p = out.fixed;
  p.q = a.q.data;
  p.k = a.k.data;
  p.v = a.v.data;
  p.o = a.o.data;
  p.lse = a.lse;
  for (int i = 0; i < 3; ++i) {
    p.q_stride[i] = a.q.stride[i];
    p.k_stride[i] = a.k.stride[i];
    p.v_stride[i] = a.v.stride[i];
    p.o_stride[i] = a.o.stride[i];
  }
  p.seq_q = static_cast<int32_t>(a.seq_q);
  p.seq_kv = static_cast<int32_t>(a.seq_kv);
  p.group = static_cast<int32_t>(a.heads_q / a.heads_kv);
  float scale = a.scale != 0.f ? a.scale : 1.f / std::sqrt(static_cast<float>(spec.head_dim_qk));
  p.scale_log2 = scale * static_cast<float>(M_LOG2E);

  // Params: by name, defaults for the rest; unknown names are errors, never ignored.
  std::vector<std::string> param_names, tensor_names;
  for (const auto& d : spec.params) param_names.push_back(d.name);
  for (const auto& t : spec.tensors) tensor_names.push_back(t.name);
  std::vector<dsl::Value> values = spec.default_params();
  for (const ParamValue& v : a.params) {
    int slot = spec.param_slot(v.name);
    if (slot < 0) bad("param '" + v.name + "' is not declared by the spec; its params: " + names_of(param_names));
    if (spec.params[slot].type == dsl::Type::I32) {
      if (v.value != std::floor(v.value) || std::abs(v.value) > 2147483647.0)
        bad("param '" + v.name + "' is i32 but got " + std::to_string(v.value));
      values[slot] = dsl::Value::of_i32(static_cast<int32_t>(v.value));
    } else {
      values[slot] = dsl::Value::of_f32(static_cast<float>(v.value));
    }
  }
  out.extra.assign(spec.params.size() + spec.tensors.size(), 0);
  for (size_t i = 0; i < spec.params.size(); ++i) {
    if (values[i].type == dsl::Type::I32) std::memcpy(&out.extra[i], &values[i].i, 4);
    else std::memcpy(&out.extra[i], &values[i].f, 4);
  }
  // Tensors: every declared one, with exactly its extent's element count, 4-byte aligned.
  for (size_t t = 0; t < spec.tensors.size(); ++t) {
    const dsl::TensorDecl& decl = spec.tensors[t];
    const BufferArg* given = nullptr;
    for (const BufferArg& b : a.buffers)
      if (b.name == decl.name) given = &b;
    if (!given) bad("tensor '" + decl.name + "' of the spec was not passed in buffers");
    int64_t numel = 1;
    for (const auto& d : decl.dims) numel = mul_checked(numel, extent_of(d, a), "tensor '" + decl.name + "': its element count");
    if (given->numel != numel)
      bad("tensor '" + decl.name + "' has " + std::to_string(given->numel) + " elements; its dims at this launch give " +
          std::to_string(numel));
    if (!given->data && numel > 0) bad("tensor '" + decl.name + "' data is null");
    if (reinterpret_cast<uintptr_t>(given->data) % 4 != 0) bad("tensor '" + decl.name + "' is not 4-byte aligned");
    std::memcpy(&out.extra[spec.params.size() + t], &given->data, sizeof(void*));
  }
  for (const BufferArg& b : a.buffers)
    if (spec.tensor_slot(b.name) < 0)
      bad("buffer '" + b.name + "' is not a tensor of the spec; its tensors: " + names_of(tensor_names));

  // Index ranges: every read of every tensor must stay in its extent for every q,
  // kv, b, h this launch can produce — proved by interval analysis, else the launch is refused.
  if (a.batch > 0 && (varlen ? a.max_seqlen_q : a.seq_q) > 0 && (varlen ? a.max_seqlen_kv : a.seq_kv) > 0) {
    dsl::Bounds bd;
    bd.b = {0, a.batch - 1};
    bd.h = {0, a.heads_q - 1};
    bd.h_kv = {0, a.heads_kv - 1};
    // Varlen: any sequence's positions and lengths up to the longest.
    bd.q = {0, (varlen ? a.max_seqlen_q : a.seq_q) - 1};
    bd.kv = {0, (varlen ? a.max_seqlen_kv : a.seq_kv) - 1};
    bd.seq_q = varlen ? dsl::IRange{0, a.max_seqlen_q} : dsl::IRange::point(a.seq_q);
    bd.seq_kv = varlen ? dsl::IRange{0, a.max_seqlen_kv} : dsl::IRange::point(a.seq_kv);
    bd.tensors = &spec.tensors;
    for (const auto& v : values) bd.params.emplace_back(v);
    for (const dsl::ExprPtr& e : {spec.mask, spec.score}) {
      if (!e) continue;
      std::vector<dsl::IndexUse> uses;
      dsl::analyze(*e, bd, &uses);
      for (const dsl::IndexUse& u : uses) {
        const dsl::TensorDecl& decl = spec.tensors.at(u.slot);
        for (size_t i = 0; i < u.index.size() && i < decl.dims.size(); ++i) {
          const int64_t ext = extent_of(decl.dims[i], a);
          if (u.index[i].lo < 0 || u.index[i].hi >= ext)
            bad("tensor '" + decl.name + "' index " + std::to_string(i) + " may range over [" +
                std::to_string(u.index[i].lo) + ", " + std::to_string(u.index[i].hi) + "], outside its extent [0, " +
                std::to_string(ext) + ") at this launch");
        }
      }
    }
  }

  // The closed-form kv range holds while the mask's i32 arithmetic cannot wrap.
  p.range_ok = 1;
  p.num_splits = 1;  // Kernel::forward splits the keys when the query side cannot fill the GPU
  p.partial_o = p.partial_lse = nullptr;
  p.cu_seqlens_q = a.cu_seqlens_q;
  p.cu_seqlens_kv = a.cu_seqlens_kv;
  p.block_table = a.block_table;
  p.page_size = static_cast<int32_t>(a.page_size);
  p.pages_per_seq = static_cast<int32_t>(a.max_pages_per_seq);
  p.seqused_kv = a.seqused_kv;
  p.grid_heads = static_cast<int32_t>(a.heads_q);  // Kernel::forward sets K/V heads where it packs GQA groups
  p.grid_batch = static_cast<int32_t>(a.batch);
  p.tile_counter = nullptr;  // Kernel::forward's, for a persistent kernel
  if (const dsl::KvRange* range = analyzed.mask ? &analyzed.kv_range : nullptr) {
    dsl::SymbolValues sv;
    sv.seq_q = a.seq_q;
    sv.seq_kv = a.seq_kv;
    for (const auto& v : values) sv.params.emplace_back(v);
    p.range_ok = dsl::kv_range_may_overflow(*range, sv, &spec.tensors) ? 0 : 1;
    if (both_ranges && dsl::kv_range_may_overflow(analyzed.q_range, dsl::swapped_sizes(sv), &spec.tensors))
      p.range_ok = 0;
  }

  out.slots.assign(kParamCount + out.extra.size(), nullptr);
  forward_param_slots(p, out.slots.data());
  for (size_t i = 0; i < out.extra.size(); ++i) out.slots[kParamCount + i] = &out.extra[i];
}

}  // namespace flashjit::rt

namespace flashjit::rt {

void pack_backward(const AnalyzedSpec& analyzed, const BackwardArgs& a, BackwardLaunch& out) {
  CallName call("backward");
  ForwardArgs f;
  static_cast<ProblemShape&>(f) = a;
  f.q = a.q;
  f.k = a.k;
  f.v = a.v;
  f.o = a.o;
  f.lse = const_cast<float*>(a.lse);  // read, never written, by the backward kernels
  f.scale = a.scale;
  f.params = a.params;
  f.buffers = a.buffers;
  f.stream = a.stream;
  // The backward reads the tile ranges both ways: the i32 check covers both.
  pack_forward(analyzed, f, out.forward, /*both_ranges=*/true);
  if (!a.lse) bad("lse is required: the forward's [batch, heads_q, seq_q] fp32 log-sum-exp (ForwardArgs::lse)");
  check_tensor("d_o", a.d_o);
  check_tensor("dq", a.dq);
  check_tensor("dk", a.dk);
  check_tensor("dv", a.dv);
  const dsl::Spec& spec = analyzed.dsl;
  check_span("d_o", a.d_o, a.batch, a.seq_q, a.heads_q, spec.head_dim_v);
  check_span("dq", a.dq, a.batch, a.seq_q, a.heads_q, spec.head_dim_qk);
  check_span("dk", a.dk, a.batch, a.seq_kv, a.heads_kv, spec.head_dim_qk);
  check_span("dv", a.dv, a.batch, a.seq_kv, a.heads_kv, spec.head_dim_v);
  // The workspace holds one fp32 per query row: batch * heads_q * seq_q * 4 bytes.
  mul_checked(mul_checked(mul_checked(a.batch, a.heads_q, "the workspace size"), a.seq_q, "the workspace size"), 4,
              "the workspace size");
  const void* inputs[] = {a.q.data, a.k.data, a.v.data, a.o.data, a.d_o.data};
  for (const Tensor* t : {&a.dq, &a.dk, &a.dv})
    for (const void* in : inputs)
      if (t->data == in) bad("an output (dq, dk or dv) has the same address as an input; outputs must not overlap inputs");
  BackwardParams& p = out.fixed;
  p.d_o = a.d_o.data;
  p.dq = a.dq.data;
  p.dk = a.dk.data;
  p.dv = a.dv.data;
  p.delta = p.dq_accum = nullptr;  // the runtime's workspace, set at launch
  p.map_q_tiles = p.map_q_counts = p.map_kv_tiles = p.map_kv_counts = nullptr;
  for (int i = 0; i < 3; ++i) {
    p.do_stride[i] = a.d_o.stride[i];
    p.dq_stride[i] = a.dq.stride[i];
    p.dk_stride[i] = a.dk.stride[i];
    p.dv_stride[i] = a.dv.stride[i];
  }
  std::vector<void*>& slots = out.forward.slots;
  const size_t at = slots.size();
  slots.resize(at + kBwdCount);
  backward_param_slots(p, slots.data() + at);
}

}  // namespace flashjit::rt

#include "runtime/launch.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

namespace flashjit::rt {

namespace {

[[noreturn]] void bad(const std::string& what) { throw Error(ErrorKind::usage, "forward: " + what); }

void check_tensor(const char* name, const Tensor& t) {
  if (!t.data) bad(std::string(name) + ".data is null");
  // Rows move as 16-byte vectors (DESIGN §4): base and every row start must be 16-byte aligned.
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0)
    bad(std::string(name) + ".data is not 16-byte aligned; flashjit requires 16-byte aligned tensors (no silent copies)");
  if (t.stride[3] != 1) bad(std::string(name) + ".stride[3] (head dim) is " + std::to_string(t.stride[3]) + "; it must be 1");
  static const char* dims[] = {"batch", "seq", "heads"};
  for (int i = 0; i < 3; ++i)
    if (t.stride[i] < 0 || t.stride[i] % 8 != 0)
      bad(std::string(name) + ".stride[" + std::to_string(i) + "] (" + dims[i] + ") is " + std::to_string(t.stride[i]) +
          "; it must be a non-negative multiple of 8 elements (16 bytes) so rows stay 16-byte aligned");
}

}  // namespace

ForwardParams pack_forward(const AttentionSpec& spec, const ForwardArgs& a) {
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
  if (a.lse && reinterpret_cast<uintptr_t>(a.lse) % 4 != 0) bad("lse is not 4-byte aligned");
  ForwardParams p{};
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
  return p;
}

}  // namespace flashjit::rt

// One forward run on the GPU against the fp64 reference: random inputs, poisoned outputs.
#pragma once

#include <memory>
#include <optional>

#include "flashjit/reference.hpp"

namespace flashjit::test {

struct Case : ProblemShape {
  Case() { seq_q = seq_kv = 128, heads_q = heads_kv = 2; }
  static Case of(AttentionSpec spec, int64_t seq_q, int64_t seq_kv, int64_t batch, int64_t heads_q, int64_t heads_kv,
                 bool bhsd = false) {
    Case c;
    c.spec = std::move(spec);
    c.seq_q = seq_q, c.seq_kv = seq_kv, c.batch = batch, c.heads_q = heads_q, c.heads_kv = heads_kv;
    c.bhsd = bhsd;
    return c;
  }
  AttentionSpec spec;
  bool bhsd = false;  // [batch, heads, seq, dim] memory, passed through strides
  // Padding (elements, multiples of 8) after each head's vector and after each sequence position
  // (BSHD), or after each position's vector and after each head (BHSD): strides wider than the
  // tensor. Padding holds NaN in the inputs, and must stay untouched in the output.
  int64_t pad_head = 0, pad_seq = 0;
  std::optional<std::string> mma;  // CompileOptions::mma ("sync": the mma.sync path on sm_90a too)
  std::optional<std::string> tiered;  // CompileOptions::tiered ("quick": the quick form only)
  std::optional<TileConfig> config;
  std::optional<TileConfig> backward_config;
  float scale = 0.f;  // 0 → 1/sqrt(d_qk)
  std::vector<ParamValue> params;
  int num_splits = 0;  // ForwardArgs::num_splits (0: automatic)
  // Backward: build the block maps once (Kernel::build_backward_block_map) and pass them to every
  // backward call, instead of the pre-passes each call runs.
  bool backward_map = false;
};

// BHSD memory ([batch, heads, seq, dim]) seen through [batch, seq, heads, dim] strides (the
// public `bshd` is the other layout).
Tensor bhsd(void* data, int64_t seq, int64_t heads, int64_t dim);

// A spec from its parts (mask/score in the DSL).
AttentionSpec make_spec(DType dt, int d_qk, int d_v, const std::string& mask, const std::string& score = "score");

// Strides of [b, s, h, d] for the case's layout and padding, the elements a tensor spans there, and
// host BSHD ↔ that layout (to the device: padding NaN; from it: padding dropped).
Tensor view(void* data, const Case& c, int64_t seq, int64_t heads, int64_t dim);
size_t device_elems(const Case& c, int64_t seq, int64_t heads, int64_t dim);
std::vector<uint16_t> relayout(const std::vector<uint16_t>& in, const Case& c, int64_t seq, int64_t heads, int64_t dim,
                               bool to_device);
// "bshd", "bhsd+pad8/16 mma=sync", …: the layout and instruction choice, for GPUCASE lines.
std::string layout(const Case& c);
// Elements of a device-layout tensor in its padding that are not the NaN poison (0xFFFF).
size_t written_padding(const std::vector<uint16_t>& device, const Case& c, int64_t seq, int64_t heads, int64_t dim);

// A case's random inputs (normal Q, K, V; spec tensors) on the host and the device, the output and
// LSE poisoned with NaN, and forward arguments pointing at them.
struct DeviceProblem {
  ref::Problem p;
  DeviceBuffer q, k, v, o, lse;
  std::vector<DeviceBuffer> tensors;
  ForwardArgs args;
};
std::unique_ptr<DeviceProblem> upload_problem(const Runtime& rt, const Case& c, uint64_t seed);

// Compiles, runs once and verifies. Prints one "GPUCASE ..." line (scripts/gpu_check.sh tabulates them).
ref::Verdict run_case(const Runtime& rt, const Case& c, uint64_t seed);

// The backward (tests/gpu_backward_case.cpp): forward, then backward with random dO and NaN-poisoned
// dQ, dK, dV, against the fp64 reference backward. `repeats` > 1 also runs it that many times more
// and requires bitwise-equal gradients (deterministic).
struct BackwardResult {
  bool ok = false;
  bool deterministic = true;
  std::string message;
};
// `deterministic` (implied by repeats > 0) takes the dQ kernel where the plan would otherwise sum
// dQ in the dK/dV kernel (BackwardArgs::deterministic).
BackwardResult run_backward_case(const Runtime& rt, const Case& c, uint64_t seed, int repeats = 0,
                                 bool deterministic = false);

}  // namespace flashjit::test

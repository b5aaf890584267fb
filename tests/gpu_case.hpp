// One forward run on the GPU against the fp64 reference: random inputs, poisoned outputs.
#pragma once

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
  std::optional<TileConfig> config;
  std::vector<ParamValue> params;
};

// BHSD memory ([batch, heads, seq, dim]) seen through [batch, seq, heads, dim] strides (the
// public `bshd` is the other layout).
Tensor bhsd(void* data, int64_t seq, int64_t heads, int64_t dim);

// A spec from its parts (mask/score in the DSL).
AttentionSpec make_spec(DType dt, int d_qk, int d_v, const std::string& mask, const std::string& score = "score");

// Compiles, runs once and verifies. Prints one "GPUCASE ..." line (scripts/gpu_check.sh tabulates them).
ref::Verdict run_case(const Runtime& rt, const Case& c, uint64_t seed);

}  // namespace flashjit::test

// `flashjit run --varlen LENGTHS`: one forward over packed sequences of the given lengths
// (ForwardArgs::cu_seqlens_*), each sequence checked against the fp64 reference on its own, timed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace flashjit::cli {

struct VarlenRun {
  std::vector<int64_t> q, kv;  // per sequence
  int64_t heads_q = 0, heads_kv = 0;
  uint64_t seed = 1;
  int splits = 0, reps = 20;
  bool verify = true;
  CompileOptions options;
};

// "Q[:KV],..." (a lone N is N query and N key tokens); Error(usage) naming the bad item.
void parse_varlen_lengths(const std::string& text, std::vector<int64_t>& q, std::vector<int64_t>& kv);

// Prints what ran and returns kOk when every sequence verified (or verification was off).
int run_varlen(const Runtime& rt, const AttentionSpec& spec, const VarlenRun& run);

// The last lines of a serving run (varlen, paged): verdict, median time, bandwidth on K and V;
// returns kOk or kFailure.
int finish_serving_run(bool ok, const std::string& verdict, double ms, double kv_bytes);

}  // namespace flashjit::cli

// Specs and tools shared by the codegen tests of the forward and the backward.
#pragma once

#include <string>
#include <vector>

#include "flashjit/flashjit.hpp"
#include "tests/support.hpp"

namespace flashjit::test {

AttentionSpec make(DType dt, int d, const std::string& mask, int dv = 0);
// `s` with score expression `score`.
AttentionSpec with_score(AttentionSpec s, const char* score);

// The ptxas found on this machine, or "" (then the tests check only that PTX was produced).
std::string ptxas_path();

// Whether a `ptxas -v` report names spills of any entry.
bool spills(const std::string& report);
// `ptxas -v` of k's PTX for k's arch (the PTX and cubin written under `dir`), checking what every
// codegen test asks of it: exit 0, no spill in any entry, no wgmma pipeline serialised. Returns
// the report for the caller's further checks.
std::string check_assembles(const std::string& ptxas, const std::string& dir, const CompiledKernel& k);

// Every mask and score at d=128 in fp16 and bf16, and causal, document and softcap at every head
// dim (bf16), including d_qk ≠ d_v.
std::vector<AttentionSpec> codegen_matrix();

}  // namespace flashjit::test

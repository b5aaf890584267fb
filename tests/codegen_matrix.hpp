// Specs and tools shared by the codegen tests of the forward and the backward.
#pragma once

#include <string>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace flashjit::test {

AttentionSpec make(DType dt, int d, const std::string& mask, int dv = 0);

// The ptxas found on this machine, or "" (then the tests check only that PTX was produced).
std::string ptxas_path();

// Every mask and score at d=128 in fp16 and bf16, and causal, document and softcap at every head
// dim (bf16), including d_qk ≠ d_v.
std::vector<AttentionSpec> codegen_matrix();

}  // namespace flashjit::test

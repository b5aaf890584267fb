// A spec from command-line flags instead of a YAML file (CUTLASS profiler style), for `run` and
// `compile`: --dtype, --head-dim, --head-dim-v, --mask, --score, --param, --tensor.
#pragma once

#include <string>
#include <vector>

#include "tools/cli.hpp"

namespace flashjit::cli {

struct SpecFlags {
  std::string dtype = "bf16";
  int head_dim = 128, head_dim_v = 0;  // 0: head_dim
  std::string mask = "none", score = "score";
  std::vector<std::string> params, tensors;  // NAME:TYPE[=DEFAULT], NAME:TYPE:DIM[,DIM...] as `check --expr`
  std::vector<CLI::Option*> options;         // to tell whether any flag was given
  bool given() const;
};

// Adds the flags to `sub`, in an option group of their own (spec_from_args rejects them beside a SPEC).
void add_spec_flags(CLI::App* sub, SpecFlags& flags);

// The spec from the flags: each expression checked on its own first so that its problems point
// into it ("--mask: <expr>:1:COL: ..."), then the whole spec validated. Error(spec) on a problem.
AttentionSpec spec_from_flags(const SpecFlags& flags);

// SPEC file, else the flags when any was given, else default_spec() (`allow_default`) or
// Error(usage) naming both ways; Error(usage) when both a SPEC and a flag are given.
AttentionSpec spec_from_args(const std::string& path, const SpecFlags& flags, bool allow_default);

}  // namespace flashjit::cli

// The public AttentionSpec ↔ the front end's validated dsl::Spec.
#pragma once

#include "compiler/dsl/spec.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit {

// Validates through the front end (same checks and canonical text as YAML); Error(spec) lists
// every problem, formatted as file:line:col with a caret.
dsl::Spec to_dsl(const AttentionSpec& spec);
AttentionSpec from_dsl(const dsl::Spec& spec);

// The launch sizes tensor extents are measured in.
inline dsl::LaunchSizes launch_sizes(const ProblemShape& s) { return {s.batch, s.heads_q, s.heads_kv, s.seq_q, s.seq_kv}; }

}  // namespace flashjit

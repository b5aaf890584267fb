// The analysed spec: a spec parsed, checked and analysed once, then shared (immutable) by every
// kernel compiled from it, every key and every launch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "compiler/dsl/kv_range.hpp"
#include "compiler/dsl/spec.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit {

// Masks the closed form does not describe exactly (tensor reads, non-affine terms) get a block
// map: a generated pre-pass lists, per tile, the tiles with any visible element and flags those
// with every element visible (FlexAttention's kv_indices / full_kv_indices).
struct BlockMapPolicy {
  bool needed = false;
  bool per_batch = false;  // the mask reads b: one map per batch entry
  bool per_head = false;   // the mask reads h or h_kv: one map per query head
};

struct AnalyzedSpec {
  AttentionSpec spec;             // as given (name included)
  dsl::Spec dsl;                  // validated: params and tensors by slot, the score gradient
  std::string canonical;          // canonical YAML, name included (what users see)
  std::string canonical_unnamed;  // the same without the name: what keys hash (names never change code)
  std::string spec_hash;          // 16 hex digits of SHA-256 of canonical_unnamed (tuning keys)
  dsl::ExprPtr mask;              // desugared (shorthands expanded); null = every key visible
  dsl::ExprPtr score;             // desugared; null = identity
  dsl::ExprPtr score_grad;        // d score' / d score, desugared; null = 1 (identity score)
  // Tile ranges in both directions (closed form, no block mask): key tiles per query tile for the
  // forward, query tiles per key tile for the backward's dK/dV (dsl/kv_range.hpp). Meaningful only
  // when `mask` is set.
  dsl::KvRange kv_range;
  dsl::KvRange q_range;
  BlockMapPolicy block_map;       // of the forward direction (the transposed one is exact alike)
  double analysis_ms = 0;         // time to parse, check and analyse

  // The analyses as text: the `analyze` stage of a compile dump and `flashjit check`.
  std::string describe() const;
};

using AnalyzedSpecPtr = std::shared_ptr<const AnalyzedSpec>;

// Parses, checks (Error(spec) lists every problem as file:line:col with a caret) and analyses.
AnalyzedSpecPtr analyze_spec(const AttentionSpec& spec);

// How many specs this process has analysed: tests show that a launch never analyses one.
uint64_t analyzed_spec_count();

}  // namespace flashjit

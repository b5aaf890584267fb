// Tile classification: is a (q, kv) tile entirely masked, entirely visible, or mixed?
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "compiler/dsl/ast.hpp"
#include "compiler/dsl/decl.hpp"

namespace flashjit::dsl {

enum class TileClass : uint8_t { Empty, Full, Partial };
std::string_view tile_class_name(TileClass c);

// Half-open tile: q in [q0, q1), kv in [kv0, kv1).
struct Box {
  int64_t q0 = 0, q1 = 0, kv0 = 0, kv1 = 0;
};

// What is known at classification time. Unknown params / b / h make the analysis
// consider every value they could take.
struct MaskInputs {
  int64_t seq_q = 0, seq_kv = 0;
  std::vector<std::optional<Value>> params;  // by slot
  std::optional<int64_t> b, h, h_kv;
  const std::vector<TensorDecl>* tensors = nullptr;
};

// Sound: Empty only if the mask is false on every element of the box, Full only if it is
// true on every element. Two stages:
//  1. interval arithmetic over the whole expression (any mask; tensor reads are unknown);
//  2. when that says Partial, an exact row sweep of the mask's linear atoms (the shorthands,
//     comparisons of sums of q, kv, constants, params): per query row, the set of visible
//     keys is a union of intervals computed exactly, so for the shorthands and any and/or/not
//     of them the answer is exact at tile granularity. Atoms that are not linear (or that
//     may wrap around i32 in this box) are bounded by true/false from both sides, which keeps
//     the answer sound. The sweep is skipped for boxes taller than kMaxSweepRows.
inline constexpr int64_t kMaxSweepRows = 1 << 16;
TileClass classify(const ExprPtr& mask, const Box& box, const MaskInputs& in);

}  // namespace flashjit::dsl

// One row of a block map (FlexAttention's kv_indices / full_kv_indices, and their transpose
// q_indices for the backward's dK/dV walk): for a tile of `rows` positions along one sequence, the
// tiles of `cols` positions along the other that hold any visible element, each flagged
// (kTileFullBit) when every element is visible. The whole CTA evaluates the mask per element of the
// candidate tiles (those the closed-form range covers); thread 0 appends.
#pragma once

#include "compiler/analyzed_spec.hpp"
#include "compiler/lower_expr.hpp"
#include "templates/common/kv_bounds.hpp"

namespace flashjit {

struct TileMapRow {
  const AnalyzedSpec* spec = nullptr;
  bool keys = false;  // rows are keys (the transposed map: its range is q_range, its columns queries)
  int rows = 0, cols = 0, threads = 0;
  ExprInputs ex;      // b, h, h_kv, seq_q, seq_kv, params, tensors
  llvm::Value* tid = nullptr;
  llvm::Value* row_tile = nullptr;
  llvm::Value* list = nullptr;   // ptr addrspace(1) to this row's i32 entries
  llvm::Value* count = nullptr;  // ptr addrspace(1) to this row's i32 count
};

void emit_tile_map_row(tile::Emitter& e, const TileMapRow& m);

// A map kernel runs on a (row tiles, heads_q, batch) grid, so gridDim gives the tensors' extents;
// when the mask reads neither b nor h, only the (b = 0, h = 0) CTAs build the one map: the others
// return here.
void return_if_idle(tile::Emitter& e, const BlockMapPolicy& policy, llvm::Value* head, llvm::Value* batch);

}  // namespace flashjit

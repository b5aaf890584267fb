// The order of a causal launch's query tiles (ForwardPlan::tiles_across_heads): longest first
// across a group of units (query heads; heads × batches in the persistent walk), not head by head.
// Head by head, the last head's longest tiles start near the end of the launch and run on while the
// other SMs idle; longest first over the whole launch has no such tail, but its CTAs would walk
// every head's K/V at once. A group holds the units whose K/V fit 16 MiB, so the tiles running at
// once still share their K/V in L2 (docs/perf-notes.md §57, §58).
#pragma once

#include "compiler/tile/emitter.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit {

struct OrderedTile {
  llvm::Value* q_tile;  // counted from the last: rank 0 is query tile q_tiles − 1
  llvm::Value* unit;    // the head, or head + heads · batch
};

// Index i of q_tiles × units: group i / (size · q_tiles), then rank and unit within the group,
// where a group holds the units whose K and V rows (seq_kv rows of d_qk + d_v 16-bit elements;
// `gqa_group` query heads share their K/V head's) fit 16 MiB, at least one. Any group size visits
// each (q_tile, unit) once.
OrderedTile ordered_tile(tile::Emitter& e, const AttentionSpec& spec, llvm::Value* i, llvm::Value* q_tiles,
                         llvm::Value* units, llvm::Value* seq_kv, llvm::Value* gqa_group);

}  // namespace flashjit

// The mask's closed-form kv range (compiler/dsl/kv_range.hpp) lowered into the kernel: per query
// tile, which keys to visit and which need no per-element mask. No block mask is read.
#pragma once

#include <vector>

#include "compiler/dsl/kv_range.hpp"
#include "compiler/tile/emitter.hpp"

namespace flashjit {

struct KvBoundsInputs {
  llvm::Value *q_first = nullptr, *q_last = nullptr;  // i32: the tile's rows [q_first, q_last]
  llvm::Value *b = nullptr, *h = nullptr, *h_kv = nullptr, *seq_q = nullptr, *seq_kv = nullptr;
  std::vector<llvm::Value*> params;  // by slot; i32 params as i32 (f32 never appear in the forms)
  llvm::Value* range_ok = nullptr;   // i1: false → visit [0, seq_kv), nothing full
};

// Half-open i32 ranges within [0, seq_kv): every visible key of the tile is in [visit_lo,
// visit_hi); every key in [full_lo, full_hi) is visible to every row of the tile.
struct KvBounds {
  llvm::Value *visit_lo, *visit_hi, *full_lo, *full_hi;
};

// The rows [first, last] of tile `tile` of `rows` rows along a sequence of `seq` (the last tile
// stops at seq − 1).
struct TileRows {
  llvm::Value *first, *last;
};
TileRows tile_rows(tile::Emitter& e, llvm::Value* tile, int rows, llvm::Value* seq);

// The tiles of `width` keys that cover the visit range: [first, end).
struct TileSpan {
  llvm::Value *first, *end;
};
TileSpan covering_tiles(tile::Emitter& e, const KvBounds& bounds, int width);

// Whether the keys [n0, n0 + width) lie inside the full range (no element masked).
llvm::Value* tile_in_full_range(tile::Emitter& e, const KvBounds& bounds, llvm::Value* n0, int width);

// The band that is the mask itself for every launch, or null: the range is exact with one visit
// band, and no atom can wrap i32 whatever the sizes and params (so the launch's range check always
// passes). Each row's visible keys are then one interval, and a masked tile tests a key against
// two per-row bounds instead of evaluating the expression per element.
const dsl::KvBand* interval_band(const dsl::KvRange& range, const std::vector<dsl::TensorDecl>* tensors);

// Row q's visible keys [lo, hi] under `band`, inside [0, seq_kv − 1] (i32; empty when lo > hi).
struct RowKeys {
  llvm::Value *lo, *hi;
};
RowKeys row_keys(tile::Emitter& e, const dsl::KvBand& band, const KvBoundsInputs& in, llvm::Value* q);

// `range` null means no mask: visit and full are both [0, seq_kv). Sound by construction:
// band guards are ignored for the visit hull (it only grows) and guarded bands never count as
// full; of several full bands the widest is used.
KvBounds emit_kv_bounds(tile::Emitter& e, const dsl::KvRange* range, const KvBoundsInputs& in);

}  // namespace flashjit

// The online softmax (FlashAttention-2, Dao 2023, Algorithm 1, lines 8–10) on a register tile of
// scores: running row max m and row sum l, the output accumulator rescaled when the max grows.
#pragma once

#include <array>
#include <vector>

#include "compiler/tile/register_tile.hpp"

namespace flashjit::tile {

// m and l of the two rows a thread holds per m-tile (rows g and g + 8 of its 16), in variables.
struct SoftmaxRows {
  std::vector<std::array<llvm::AllocaInst*, 2>> m, l;
};

// Works in the exp2 domain with the softmax scale folded into `multiplier` (one FFMA and one
// ex2.approx per score): per row, m' = max(m, rowmax(s)), s ← 2^(s·k − m'·k), l ← l·α + rowsum(s)
// and every O accumulator of the row ← O·α, α = 2^(m·k − m'·k), k = multiplier. A row whose keys
// are all masked keeps m = −inf; using 0 as its max keeps 2^(s·k − m'·k) at 0 instead of NaN.
// grow_at > 0: a row keeps its max until the tile's max exceeds it by more than grow_at in the exp2
// domain, and a warp rescales O only when one of its rows moved its max.
void online_softmax(Emitter& e, RegTile& s, llvm::Value* multiplier, const SoftmaxRows& rows, const TileVars& o,
                    float grow_at = 0.f);

}  // namespace flashjit::tile

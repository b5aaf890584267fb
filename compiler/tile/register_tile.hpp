// Register tiles: a warp's m16n8 accumulator fragments (PTX ISA §9.7.13.4.8: register i of a lane
// holds row lane/4 + 8·(i >> 1), column 2·(lane % 4) + (i & 1) of its 16 × 8 tile), per 16-row
// m-tile and 8-column n-tile. mma.sync and wgmma both give every thread this layout.
#pragma once

#include <array>
#include <vector>

#include "compiler/tile/emitter.hpp"

namespace flashjit::tile {

using Acc4 = std::array<llvm::Value*, 4>;    // four f32 accumulators of one m16n8 tile
using RegTile = std::vector<std::vector<Acc4>>;  // [m-tile][n-tile]

// A tile of zeros: m_tiles × n_tiles constant accumulators.
RegTile zero_tile(Emitter& e, int m_tiles, int n_tiles);

// A register tile held in variables (entry-block allocas that SROA turns back into registers):
// the state a loop carries from one iteration to the next.
struct TileVars {
  std::vector<std::vector<std::array<llvm::AllocaInst*, 4>>> vars;  // [m-tile][n-tile]
  RegTile load(Emitter& e) const;
  void store(Emitter& e, const RegTile& t) const;
};

}  // namespace flashjit::tile

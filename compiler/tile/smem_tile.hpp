// Shared-memory tiles of 16-bit elements in the 128-byte-swizzle layout, and the per-thread
// addresses of warp-wide fragment accesses into them (ldmatrix rows, cp.async chunks).
#pragma once

#include <array>

#include "compiler/tile/emitter.hpp"

namespace flashjit::tile {

// A tile of `rows` rows, stored as panels of 64 columns (128 bytes per row, rows dense, panel
// after panel), with 16-byte chunk c of row r at chunk c ^ (r % 8) inside its 128-byte row. That is
// wgmma's 128-byte-swizzle canonical layout (PTX ISA §9.7.15.5.1, "Shared Memory Matrix Layout":
// 8-row × 128 B atoms, 1024-byte aligned), and the 8 row addresses of one ldmatrix and the chunks
// of one cp.async quarter-warp hit distinct banks.
struct SmemTile {
  llvm::Value* base;  // i32 .shared address, 1024-byte aligned
  int rows;
  // Byte offset of 16-byte chunk `chunk` (of the whole row) of row `row`.
  llvm::Value* offset(Emitter& e, llvm::Value* row, llvm::Value* chunk) const;
};

// The addresses of one warp-wide fragment access, row = R + r and chunk = 2c + bit, with R (a
// multiple of 8) and c compile-time constants and r, bit per thread. R keeps r % 8, so the chunk's
// panel is c >> 2 and its swizzled position (2·(c & 3) + bit) ^ (r % 8): four per-thread byte
// offsets (by c & 3) plus the constant 128·R + 128·rows·(c >> 2), which goes into the instruction.
struct FragAddr {
  std::array<llvm::Value*, 4> off{};
  int rows = 0;
  FragAddr(Emitter& e, int rows, llvm::Value* r, llvm::Value* bit);
  llvm::Value* reg(Emitter& e, llvm::Value* base, int c) const { return e.b.CreateAdd(base, off[c & 3]); }
  int imm(int R, int c) const { return 128 * R + 128 * rows * (c >> 2); }
};

}  // namespace flashjit::tile

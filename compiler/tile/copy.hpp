// Cooperative global → shared tile copies in 16-byte vectors, zero-filling rows past the end.
#pragma once

#include "compiler/tile/emitter.hpp"

namespace flashjit::tile {

// A [rows × cols] tile of 16-bit elements: row r starts at `base + (row0 + r) * row_stride`
// (elements) in global memory and at `smem + r * smem_stride` in shared memory. Rows with
// row0 + r >= row_end are written as zeros. cols % 8 == 0 and every global row is 16-byte aligned
// (checked at launch). All `threads` threads of the CTA call this with their `tid`.
struct TileCopy {
  llvm::Value* global;      // ptr addrspace(1) to element 0 of row 0 of the tensor slice
  llvm::Value* row_stride;  // i64, elements
  llvm::Value* row0;        // i32
  llvm::Value* row_end;     // i32
  llvm::Value* smem;        // ptr addrspace(3)
  int rows, cols, threads;
  int smem_stride;          // elements; cols + 2 pads rows so lane-per-row reads miss no bank
};
void copy_tile_to_shared(Emitter& e, const TileCopy& c, llvm::Value* tid);

}  // namespace flashjit::tile

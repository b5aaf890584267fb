// Global → shared copies of a tile of rows with cp.async (PTX ISA §9.7.9.25), the whole CTA
// cooperating: 16-byte chunks, rows past the end and columns past d zero-filled without a read.
#pragma once

#include <vector>

#include "compiler/tile/smem_tile.hpp"

namespace flashjit::tile {

// Rows [first, first + dst.rows) of a [seq, d] slice in global memory; rows at or past `end` read
// as zeros.
struct GlobalRows {
  llvm::Value* base;        // ptr addrspace(1) to the slice's row 0 (16-bit elements)
  llvm::Value* row_stride;  // i64, elements
  llvm::Value* first;       // i32
  llvm::Value* end;         // i32
  // GQA packing (FlashAttention-3's pack_gqa): row r is position r / group of head r % group, at
  // (r / group)·row_stride + (r % group)·group_stride. 1: row r at r·row_stride.
  int group = 1;
  llvm::Value* group_stride = nullptr;  // i64, elements (the head stride)
  // Paged rows (a paged K/V cache): row r is row r % page_size of page table[r / page_size], at
  // table[..]·page_stride + (r % page_size)·row_stride. Null: not paged.
  llvm::Value* page_table = nullptr;   // ptr addrspace(1) to i32, this sequence's row of the table
  llvm::Value* page_size = nullptr;    // i32
  llvm::Value* page_stride = nullptr;  // i64, elements
  int page_rows = 0;                   // the page size when the code is specialised for it; 0: page_size
  // page_rows set: the table entries of the tile's pages (tile_pages), when the caller loaded them
  // once for several copies of the same rows (K and V); empty: the copy loads them.
  std::vector<llvm::Value*> page_ids;
};

// Whether a paged copy of `rows`-row tiles starting at multiples of `rows` looks up one table entry
// per page (page_rows divides `rows` or is a multiple of it) instead of one per row.
bool pages_per_tile(const GlobalRows& src, int rows);
// The table entries of the max(1, rows / page_rows) pages of the tile at src.first (pages_per_tile
// must hold), clamped to the sequence's last page, and the entries 32 pages ahead prefetched.
std::vector<llvm::Value*> tile_pages(Emitter& e, const GlobalRows& src, int rows);

// Element offset of row `row` (i32) of `src`, in i64.
llvm::Value* row_offset(Emitter& e, const GlobalRows& src, llvm::Value* row);

// The whole CTA (`threads` threads, this one `tid`) copies `src` into `dst`. Columns at or past d,
// up to the next multiple of 16 (what the mma k-steps read), become zeros too. `once`: a copy a
// CTA runs once (Q, the prologue's K/V) is emitted with bounds checks only — an unchecked twin
// would save a few instructions once and cost compile time every time. A paged source must start
// at a multiple of dst.rows (a key tile): its lookups are then per page or per wave of rows.
void copy_rows(Emitter& e, const SmemTile& dst, const GlobalRows& src, int d, int threads, llvm::Value* tid, bool once);

}  // namespace flashjit::tile

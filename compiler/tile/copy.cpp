#include "compiler/tile/copy.hpp"

#include "compiler/tile/mma.hpp"

#include <algorithm>
#include <vector>

#include "compiler/tile/inline_ptx.hpp"

namespace flashjit::tile {

namespace {

using llvm::Value;

// A wave of `threads` does not cover whole rows: each copy finds its row and chunk anew.
void copy_ragged(Emitter& e, const SmemTile& dst, const GlobalRows& src, int d, int threads, Value* tid) {
  auto& B = e.b;
  const int chunks = (d + 15) / 16 * 2;
  const int total = dst.rows * chunks;
  for (int first = 0; first < total; first += threads) {
    auto body = [&] {
      Value* idx = B.CreateAdd(tid, e.c32(first));
      Value* r = B.CreateUDiv(idx, e.c32(chunks));
      Value* c = B.CreateURem(idx, e.c32(chunks));
      Value* dst_addr = B.CreateAdd(dst.base, dst.offset(e, r, c));
      Value* row = B.CreateAdd(src.first, r);
      Value* valid = B.CreateAnd(B.CreateICmpSLT(row, src.end), B.CreateICmpULT(c, e.c32(d / 8)));
      Value* safe_row = B.CreateSelect(valid, row, src.first);
      Value* safe_col = B.CreateSelect(valid, B.CreateShl(c, 3), e.c32(0));
      Value* off = B.CreateAdd(row_offset(e, src, safe_row), B.CreateZExt(safe_col, e.i64()));
      cp_async_16(e, dst_addr, 0, B.CreateGEP(B.getInt16Ty(), src.base, off), valid);
    };
    if (first + threads <= total) body();
    else e.when(B.CreateICmpULT(B.CreateAdd(tid, e.c32(first)), e.c32(total)), "copy.tail", body);
  }
}

// The block table's entries never change during a launch: loads the compiler may treat as
// invariant (ld.global.nc), free to be issued early.
Value* load_page(Emitter& e, const GlobalRows& src, Value* slot) {
  auto* load = e.b.CreateAlignedLoad(e.i32(), e.b.CreateGEP(e.i32(), src.page_table, slot), llvm::Align(4));
  load->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(e.b.getContext(), {}));
  return load;
}

// The sequence's last page (page size `size`): rows past the end are never read, but the entries
// of their pages are loaded, so slots are clamped to it.
Value* last_page(Emitter& e, const GlobalRows& src, Value* size) {
  auto& B = e.b;
  return B.CreateUDiv(B.CreateBinaryIntrinsic(llvm::Intrinsic::smax, B.CreateSub(src.end, e.c32(1)), e.c32(0)), size);
}

// Prefetches the table entries 32 pages past `slot` into L1 (PTX ISA §9.7.9.15, "prefetch"): a
// table line holds 32 pages, and without it the first lookup in each new line waits for a miss
// with the whole tile's copies behind it.
void prefetch_pages_ahead(Emitter& e, const GlobalRows& src, Value* slot, Value* last) {
  auto& B = e.b;
  Value* ahead = B.CreateBinaryIntrinsic(llvm::Intrinsic::umin, B.CreateAdd(slot, e.c32(32)), last);
  Value* line = B.CreateGEP(e.i32(), src.page_table, ahead);
  inline_ptx(e, B.getVoidTy(), {line}, "prefetch.global.L1 [$0];", "l");
}

// Offsets of rows first + w·rp, w < n_waves, of a paged source, for a thread to add r·row_stride
// (r < rp) to: rp divides 16, which divides both the page size and `first` (a key tile's start), so
// a wave's rp rows never straddle a page. Everything here depends on `first` alone — the same in
// every thread, which ptxas can keep in uniform registers — with one division: later rows step
// `within` by rp and carry into the next slot.
std::vector<Value*> paged_offsets(Emitter& e, const GlobalRows& src, Value* first, int rp, int n_waves) {
  auto& B = e.b;
  Value* r = B.CreateBinaryIntrinsic(llvm::Intrinsic::smax, first, e.c32(0));
  Value* last = last_page(e, src, src.page_size);
  Value* slot = B.CreateUDiv(r, src.page_size);
  Value* within = B.CreateSub(r, B.CreateMul(slot, src.page_size));
  std::vector<Value*> offsets;
  for (int w = 0; w < n_waves; ++w) {
    if (w) {
      within = B.CreateAdd(within, e.c32(rp));
      Value* cross = B.CreateICmpSGE(within, src.page_size);
      within = B.CreateSelect(cross, B.CreateSub(within, src.page_size), within);
      slot = B.CreateAdd(slot, B.CreateZExt(cross, e.i32()));
    }
    Value* page = load_page(e, src, B.CreateBinaryIntrinsic(llvm::Intrinsic::umin, slot, last));
    offsets.push_back(B.CreateAdd(B.CreateMul(B.CreateSExt(page, e.i64()), src.page_stride),
                                  B.CreateMul(B.CreateSExt(within, e.i64()), src.row_stride)));
  }
  prefetch_pages_ahead(e, src, slot, last);
  return offsets;
}

// The specialised page size P (GlobalRows::page_rows) divides the tile's `rows` or is a multiple of
// them, and the tile starts at a multiple of `rows` (a key tile): the tile covers max(1, rows / P)
// whole or part pages. One table entry per page — the same address in every thread, loaded once
// for K and V when the caller passes them — and the thread's own row and chunk (`mine`) added
// once; copies within a page then step by the row stride, as unpaged rows do.
std::vector<Value*> page_bases(Emitter& e, const GlobalRows& src, int rows, Value* mine) {
  auto& B = e.b;
  const int P = src.page_rows;
  Value* first = B.CreateBinaryIntrinsic(llvm::Intrinsic::smax, src.first, e.c32(0));
  Value* within = B.CreateURem(first, e.c32(P));  // 0 when P divides rows
  Value* in_page = B.CreateAdd(B.CreateMul(B.CreateZExt(within, e.i64()), src.row_stride), mine);
  const std::vector<Value*> ids = src.page_ids.empty() ? tile_pages(e, src, rows) : src.page_ids;
  std::vector<Value*> bases;
  for (Value* page : ids) bases.push_back(B.CreateAdd(B.CreateMul(B.CreateSExt(page, e.i64()), src.page_stride), in_page));
  return bases;
}

}  // namespace

bool pages_per_tile(const GlobalRows& src, int rows) {
  return src.page_table && src.page_rows > 0 && (src.page_rows % rows == 0 || rows % src.page_rows == 0);
}

std::vector<Value*> tile_pages(Emitter& e, const GlobalRows& src, int rows) {
  auto& B = e.b;
  const int P = src.page_rows;
  Value* first = B.CreateBinaryIntrinsic(llvm::Intrinsic::smax, src.first, e.c32(0));
  Value* slot = B.CreateUDiv(first, e.c32(P));
  Value* last = last_page(e, src, e.c32(P));
  std::vector<Value*> ids;
  for (int j = 0; j < std::max(1, rows / P); ++j)
    ids.push_back(load_page(e, src, B.CreateBinaryIntrinsic(llvm::Intrinsic::umin, B.CreateAdd(slot, e.c32(j)), last)));
  prefetch_pages_ahead(e, src, slot, last);
  return ids;
}

Value* row_offset(Emitter& e, const GlobalRows& src, Value* row) {
  auto& B = e.b;
  if (src.page_table) {
    // Rows past the end are never read, but their table entry is: clamp to the last row so the
    // lookup stays inside the sequence's row of the table.
    Value* r = B.CreateBinaryIntrinsic(llvm::Intrinsic::smax,
                                       B.CreateBinaryIntrinsic(llvm::Intrinsic::smin, row, B.CreateSub(src.end, e.c32(1))),
                                       e.c32(0));
    Value* slot = B.CreateUDiv(r, src.page_size);
    Value* page = load_page(e, src, slot);
    Value* within = B.CreateSub(r, B.CreateMul(slot, src.page_size));
    return B.CreateAdd(B.CreateMul(B.CreateSExt(page, e.i64()), src.page_stride),
                       B.CreateMul(B.CreateZExt(within, e.i64()), src.row_stride));
  }
  if (src.group == 1) return B.CreateMul(B.CreateSExt(row, e.i64()), src.row_stride);
  Value* pos = B.CreateUDiv(row, e.c32(src.group));
  Value* head = B.CreateURem(row, e.c32(src.group));
  return B.CreateAdd(B.CreateMul(B.CreateZExt(pos, e.i64()), src.row_stride),
                     B.CreateMul(B.CreateZExt(head, e.i64()), src.group_stride));
}

void copy_rows(Emitter& e, const SmemTile& dst, const GlobalRows& src, int d, int threads, Value* tid, bool once) {
  auto& B = e.b;
  const int chunks = (d + 15) / 16 * 2;
  const int total = dst.rows * chunks;
  if (threads % chunks != 0) return copy_ragged(e, dst, src, d, threads, tid);
  // A wave covers rp whole rows: a thread copies the same chunk c0 of rows r0 + i·rp in every
  // wave; its swizzle repeats every 8 rows, so one offset per distinct (i·rp) % 8 and a constant
  // per wave address every destination.
  const int rp = threads / chunks;
  Value* r0 = B.CreateUDiv(tid, e.c32(chunks));
  Value* c0 = B.CreateURem(tid, e.c32(chunks));
  std::array<Value*, 8> wave_off{};  // built here, before the branches below, so both may use them
  for (int wave = 0; wave * threads < total; ++wave)
    if (Value*& o = wave_off[wave * rp % 8]; !o) o = dst.offset(e, B.CreateAdd(r0, e.c32(wave * rp % 8)), c0);
  // Chunks past d (up to the k-step's 16 columns) are zeros; only d % 16 ≠ 0 has them.
  Value* col_ok = d % 16 ? B.CreateICmpULT(c0, e.c32(d / 8)) : nullptr;
  // The source steps by rp rows per wave (a chain of adds, so LLVM keeps no per-wave offsets).
  // `checked`: rows at or past the end (and padding chunks) read nothing (src-size 0), from the
  // slice's first row.
  auto waves = [&](bool checked) {
    Value* row = B.CreateAdd(src.first, r0);
    Value* col = B.CreateZExt(B.CreateShl(c0, 3), e.i64());
    // Paged rows, rp dividing 16: each wave's offset from the tile's first row (paged_offsets),
    // the thread's own row and chunk added once; the table loads are in flight together before
    // the first cp.async. `first` is a multiple of 16 here: a key tile's start.
    const int n_waves = (total + threads - 1) / threads;
    const int P = src.page_rows;
    const bool by_page = pages_per_tile(src, dst.rows) && P % rp == 0;
    const bool by_wave = src.page_table && !by_page && 16 % rp == 0;
    const std::vector<Value*> paged = by_wave ? paged_offsets(e, src, src.first, rp, n_waves) : std::vector<Value*>{};
    Value* mine = by_wave || by_page ? B.CreateAdd(B.CreateMul(B.CreateZExt(r0, e.i64()), src.row_stride), col) : nullptr;
    const std::vector<Value*> pages = by_page ? page_bases(e, src, dst.rows, mine) : std::vector<Value*>{};
    Value* off = by_page ? pages[0] : by_wave ? B.CreateAdd(paged[0], mine) : B.CreateAdd(row_offset(e, src, row), col);
    Value* p = B.CreateGEP(B.getInt16Ty(), src.base, off);
    Value* step = B.CreateMul(src.row_stride, e.c64(rp));
    for (int wave = 0; wave * threads < total; ++wave) {
      // Packed rows do not step by a fixed stride: each wave's address from its row.
      if (wave && by_page && P < dst.rows && wave * rp % P == 0)
        p = B.CreateGEP(B.getInt16Ty(), src.base, pages[size_t(wave * rp / P)]);
      else if (wave && by_page) p = B.CreateGEP(B.getInt16Ty(), p, step);
      else if (wave && by_wave)
        p = B.CreateGEP(B.getInt16Ty(), src.base, B.CreateAdd(paged[size_t(wave)], mine));
      else if (wave && (src.group > 1 || src.page_table))
        p = B.CreateGEP(B.getInt16Ty(), src.base, B.CreateAdd(row_offset(e, src, B.CreateAdd(row, e.c32(wave * rp))), col));
      else if (wave) p = B.CreateGEP(B.getInt16Ty(), p, step);
      const int k = wave * rp % 8;
      Value* dst_addr = B.CreateAdd(dst.base, wave_off[k]);
      auto copy = [&] {
        if (!checked) return cp_async_16(e, dst_addr, 128 * (wave * rp - k), p, B.getTrue());
        Value* valid = B.CreateICmpSLT(B.CreateAdd(row, e.c32(wave * rp)), src.end);
        if (col_ok) valid = B.CreateAnd(valid, col_ok);
        cp_async_16(e, dst_addr, 128 * (wave * rp - k), B.CreateSelect(valid, p, src.base), valid);
      };
      // A last wave wider than the tile (small d or tiles, e.g. d=16 with 32 rows) is cut at it.
      if ((wave + 1) * threads <= total) copy();
      else e.when(B.CreateICmpULT(B.CreateAdd(tid, e.c32(wave * threads)), e.c32(total)), "copy.tail", copy);
    }
  };
  // Every tile but a sequence's last lies wholly inside the tensor: no bounds checks there. The
  // checked copy is the same chain with one compare and two selects per wave: about a third of the
  // per-copy address arithmetic of the ragged copy, and code size is most of a cold compile's time.
  if (once || col_ok) return waves(true);
  Value* inside = B.CreateICmpSLE(B.CreateAdd(src.first, e.c32(dst.rows)), src.end);
  e.when(inside, "copy.inside", [&] { waves(false); });
  e.when(B.CreateNot(inside), "copy.edge", [&] { waves(true); });
}

}  // namespace flashjit::tile

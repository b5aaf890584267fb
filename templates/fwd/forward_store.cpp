// The forward's epilogue: O normalised by l and the LSE, or a split's fp32 partials.
#include <cmath>

#include "compiler/tile/bulk.hpp"
#include "compiler/tile/copy.hpp"
#include "compiler/tile/gpu.hpp"
#include "compiler/tile/inline_ptx.hpp"
#include "compiler/tile/mma.hpp"
#include "compiler/tile/reduce.hpp"
#include "compiler/tile/wgmma.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/common/kernel_args.hpp"
#include "templates/fwd/forward_kernel.hpp"

namespace flashjit::fwd {

// O = acc / l, LSE = ln Σ e^{score} = (m·multiplier + log2 l)·ln 2; rows with no visible key get
// O = 0 and LSE = −inf. A split kernel writes both in fp32 to the partial buffers instead.
void ForwardKernel::store_output() {
  auto& B = e_.b;
  Value* lse_ptr = arg(kParamLse);
  Value* o_base = B.CreateGEP(B.getInt16Ty(), arg(kParamO),  // here, not before the loop: nothing stays live across it
                              VARLEN ? slice_offset(e_, strides_[3], e_.c32(0), q0_, head_)
                                     : slice_offset(e_, strides_[3], batch_, e_.c32(0), head_));
  const bool staged = plan_.staged_store;
  if (staged && plan_.stage_in_q && !PERSISTENT) tile::sync_threads(e_);  // every warp's last read of Q done
  auto reciprocal = [&](Value* lsum) {  // 0 where no key reached the row: O = 0
    return B.CreateSelect(B.CreateFCmpOGT(lsum, e_.cf(0.f)), B.CreateFDiv(e_.cf(1.f), lsum), e_.cf(0.f));
  };
  Value* inv_g = nullptr;
  for (size_t mt = 0; mt < o_.vars.size(); ++mt)
    for (int r = 0; r < 2; ++r) {
      Value* row = row_of(int(mt), 2 * r);
      Value* lsum = tile::quad_sum(e_, B.CreateLoad(e_.f32(), softmax_.l[mt][r]));
      Value* mrow = B.CreateLoad(e_.f32(), softmax_.m[mt][r]);
      if (staged) {  // stmatrix is warp-wide: rows out of range are staged too, not stored
        Value* inv = reciprocal(lsum);
        if (r == 0)
          inv_g = inv;
        else
          stage_matrices(mt, inv_g, inv);
      }
      e_.when(B.CreateICmpSLT(row, rows_), "store", [&] {
        Value* any = B.CreateFCmpOGT(lsum, e_.cf(0.f));
        Value* inv = reciprocal(lsum);
        auto natural_lse = [&] {
          Value* log2_sum = B.CreateFAdd(B.CreateFMul(mrow, plan_.spec->score ? e_.cf(1.f) : scale_log2_),
                                         tile::log2_fast(e_, lsum));
          return B.CreateSelect(any, B.CreateFMul(log2_sum, e_.cf(static_cast<float>(M_LN2))), e_.neg_inf());
        };
        // Row index ((b·H + h)·S + q) of [batch, heads_q, seq_q]; varlen: (h·T + cu[b] + q) of
        // [heads_q, total tokens T].
        auto row_index = [&] {
          Value* b = VARLEN ? e_.c32(0) : batch_;
          Value* len = VARLEN ? arg(kParamSeqQ) : seq_q_;
          Value* q = VARLEN ? B.CreateAdd(q0_, query_of(row)) : query_of(row);
          Value* idx = B.CreateAdd(B.CreateMul(B.CreateZExt(b, e_.i64()), B.CreateZExt(ex_.heads_q, e_.i64())),
                                   B.CreateZExt(head_of(row), e_.i64()));
          return B.CreateAdd(B.CreateMul(idx, B.CreateSExt(len, e_.i64())), B.CreateSExt(q, e_.i64()));
        };
        if (SPLIT) return store_partial(mt, r, row_index(), inv, natural_lse);
        if (!staged) tile::store_row_pairs(e_, o_, mt, r, OT, inv, t4_, o_row(o_base, row), spec_.dtype);
        Value* has_lse = B.CreateICmpNE(lse_ptr, llvm::ConstantPointerNull::get(llvm::PointerType::get(e_.ctx, 1)));
        e_.when(B.CreateAnd(has_lse, B.CreateICmpEQ(t4_, e_.c32(0))), "store.lse",
                [&] { B.CreateStore(natural_lse(), B.CreateGEP(e_.f32(), lse_ptr, row_index())); });
      });
    }
  if (staged) store_staged(o_base);
}

Value* ForwardKernel::epilogue_lane() { return tile::in_loop(e_, lane_); }

Value* ForwardKernel::o_row(Value* o_base, Value* row) {
  return e_.b.CreateGEP(e_.b.getInt16Ty(), o_base,
                        tile::row_offset(e_, {nullptr, strides_[3][1], nullptr, nullptr, G, strides_[3][2]}, row));
}

// ForwardPlan::staged_store (FlashAttention-3's epilogue, less its TMA store): each warp's rows of O
// go to its own 16·m_tiles rows of the staging buffer by stmatrix, then out as 16-byte vectors,
// lanes on consecutive chunks of a row, so an instruction writes whole 128-byte lines instead of
// 16 bytes in each of 8 rows. 16-byte chunk c of staged row r sits at chunk c ^ (r % 8): stmatrix's
// 8 row addresses per matrix and the vectors' loads (8 lanes on 8 chunks of a row) then both hit
// 32 distinct banks. Only the warp itself touches its rows, so a warp barrier orders the stores
// and loads (and the loads before the next tile's stores).
Value* ForwardKernel::staged_rows() {
  auto& B = e_.b;
  const int row_bytes = 2 * spec_.head_dim_v, rows = 16 * int(o_.vars.size());
  if (o_stage_) return B.CreateAdd(o_stage_, B.CreateMul(warp_, e_.c32(rows * row_bytes)));
  return B.CreateAdd(smem_, B.CreateAdd(e_.c32(plan_.smem.o_stage), B.CreateMul(warp_, e_.c32(rows * row_bytes))));
}

// stmatrix.m8n8.x4 (PTX ISA §9.7.13.4.16, sm_90) stores four 8×8 matrices, rows g and g + 8 of
// n-tiles ot and ot + 1: the accumulator already holds them in its layout (thread 4·g + t4 has row
// g, columns 2·t4 and 2·t4 + 1), and lane l gives the address of row l % 8 of matrix l / 8.
void ForwardKernel::stage_matrices(size_t mt, Value* inv_g, Value* inv_g8) {
  auto& B = e_.b;
  // ForwardPlan::tma_store: rows of 128 bytes in 64-column panels of the warp's rows, as the TMA's
  // 128-byte swizzle reads them; else whole rows of 2·d_v bytes.
  const int pitch = plan_.tma_store ? 128 : 2 * spec_.head_dim_v, rows = 16 * int(o_.vars.size());
  Value* lane = epilogue_lane();
  Value* matrix = B.CreateLShr(lane, e_.c32(3));
  Value* in_matrix = B.CreateAnd(lane, e_.c32(7));
  Value* lane_row = B.CreateAdd(B.CreateShl(B.CreateAnd(matrix, e_.c32(1)), e_.c32(3)), in_matrix);
  Value* base = B.CreateAdd(staged_rows(), B.CreateMul(lane_row, e_.c32(pitch)));
  // Chunk (ot + matrix / 2) ^ (row % 8) = ot ^ (matrix / 2 ^ row % 8), ot being even.
  Value* swizzle = B.CreateShl(B.CreateXor(B.CreateLShr(matrix, e_.c32(1)), in_matrix), e_.c32(4));
  const int imm = 16 * int(mt) * pitch;  // + 128 bytes per 8 chunks (the XOR's reach), or a panel
  auto pair = [&](int ot, int r, Value* inv) {
    Value* x = B.CreateFMul(B.CreateLoad(e_.f32(), o_.vars[mt][size_t(ot)][2 * r]), inv);
    Value* y = B.CreateFMul(B.CreateLoad(e_.f32(), o_.vars[mt][size_t(ot)][2 * r + 1]), inv);
    return tile::pack_pair_rn(e_, x, y, spec_.dtype);
  };
  for (int ot = 0; ot < OT; ot += 2) {
    Value* at = B.CreateAdd(base, B.CreateXor(e_.c32((ot & 7) << 4), swizzle));
    tile::inline_ptx(e_, B.getVoidTy(),
                     {at, pair(ot, 0, inv_g), pair(ot, 1, inv_g8), pair(ot + 1, 0, inv_g), pair(ot + 1, 1, inv_g8)},
                     "stmatrix.sync.aligned.m8n8.x4.shared.b16 " +
                         tile::asm_address(0, imm + (plan_.tma_store ? (ot >> 3) * rows * pitch : (ot & ~7) << 4)) +
                         ", " + tile::asm_reg_list(1, 4) + ";",
                     "r,r,r,r,r,~{memory}");
  }
}

void ForwardKernel::store_staged(Value* o_base) {
  auto& B = e_.b;
  const int row_bytes = 2 * spec_.head_dim_v, rows = 16 * int(o_.vars.size()), per_pass = 32 / OT;
  auto warp_sync = [&] { tile::inline_ptx(e_, B.getVoidTy(), {}, "bar.warp.sync -1;", "~{memory}"); };
  if (plan_.tma_store) {
    tile::fence_proxy_async(e_);  // each lane's stmatrix writes, for the TMA unit's reads
    warp_sync();
    Value* map = tile::tensor_map_address(e_, param_symbol(fn_, fn_->arg_size() - plan_.tensor_maps() + kMapO));
    Value* region = staged_rows();
    Value* row = B.CreateAdd(q_start_, tc_->warp_row0());
    e_.when(B.CreateICmpEQ(epilogue_lane(), e_.c32(0)), "o.tma", [&] {
      for (int p = 0; p * kTensorMapPanel < spec_.head_dim_v; ++p)
        tile::tensor_store_4d(e_, B.CreateAdd(region, e_.c32(p * rows * 128)), map,
                              {e_.c32(p * kTensorMapPanel), row, head_, batch_});
      tile::bulk_commit(e_);
      tile::bulk_wait(e_, true);  // the staging rows read out before the CTA exits (PTX ISA, cp.async.bulk.wait_group)
    });
    return;
  }
  warp_sync();
  Value* region = staged_rows();
  Value* lane = epilogue_lane();
  Value* chunk = B.CreateAnd(lane, e_.c32(OT - 1));
  Value* row0 = B.CreateLShr(lane, e_.c32(__builtin_ctz(unsigned(OT))));
  llvm::Type* v4 = llvm::FixedVectorType::get(e_.i32(), 4);
  llvm::Type* four = llvm::StructType::get(e_.ctx, {e_.i32(), e_.i32(), e_.i32(), e_.i32()});
  for (int pass = 0; pass < rows / per_pass; ++pass) {
    Value* lrow = B.CreateAdd(row0, e_.c32(pass * per_pass));
    Value* swizzled = B.CreateXor(chunk, B.CreateAnd(lrow, e_.c32(7)));
    Value* at = B.CreateAdd(region, B.CreateAdd(B.CreateMul(lrow, e_.c32(row_bytes)), B.CreateShl(swizzled, 4)));
    Value* got =
        tile::inline_ptx(e_, four, {at}, "ld.shared.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,r,~{memory}");
    Value* vec = llvm::UndefValue::get(v4);
    for (unsigned i = 0; i < 4; ++i) vec = B.CreateInsertElement(vec, B.CreateExtractValue(got, {i}), uint64_t(i));
    Value* row = B.CreateAdd(q_start_, B.CreateAdd(tc_->warp_row0(), lrow));
    e_.when(B.CreateICmpSLT(row, rows_), "store.v4", [&] {
      Value* row_ptr = o_row(o_base, row);
      B.CreateAlignedStore(vec, B.CreateGEP(B.getInt16Ty(), row_ptr, B.CreateShl(chunk, 3)), llvm::Align(16));
    });
  }
  // The staging writes (generic proxy) ordered before the TMA's refill (async proxy) of the buffer
  // (PTX ISA §9.7.12.4, proxy fences).
  if (o_free_) tile::fence_proxy_async(e_);
  warp_sync();
  if (o_free_) release(o_free_);
}

// This split's O (normalised, fp32 pairs) and LSE of one row, at its slice of the partial buffers
// (layouts in templates/common/forward_abi.hpp).
void ForwardKernel::store_partial(size_t mt, int r, Value* row_index, Value* inv, const std::function<Value*()>& lse) {
  auto& B = e_.b;
  Value* rows = VARLEN ? B.CreateMul(B.CreateZExt(ex_.heads_q, e_.i64()), B.CreateSExt(arg(kParamSeqQ), e_.i64()))
                      : B.CreateMul(B.CreateMul(B.CreateZExt(tile::grid_dim(e_, 2), e_.i64()),
                                                B.CreateZExt(ex_.heads_q, e_.i64())),
                                    B.CreateSExt(seq_q_, e_.i64()));
  Value* at = B.CreateAdd(B.CreateMul(B.CreateZExt(split_, e_.i64()), rows), row_index);
  Value* o_row = B.CreateGEP(e_.f32(), arg(kParamPartialO), B.CreateMul(at, e_.c64(spec_.head_dim_v)));
  for (int ot = 0; ot < OT; ++ot) {
    Value* col = B.CreateAdd(e_.c32(ot * 8), B.CreateShl(t4_, 1));
    Value* pair = llvm::UndefValue::get(llvm::FixedVectorType::get(e_.f32(), 2));
    pair = B.CreateInsertElement(pair, B.CreateFMul(B.CreateLoad(e_.f32(), o_.vars[mt][ot][2 * r]), inv), uint64_t(0));
    pair = B.CreateInsertElement(pair, B.CreateFMul(B.CreateLoad(e_.f32(), o_.vars[mt][ot][2 * r + 1]), inv), uint64_t(1));
    B.CreateAlignedStore(pair, B.CreateGEP(e_.f32(), o_row, B.CreateZExt(col, e_.i64())), llvm::Align(8));
  }
  e_.when(B.CreateICmpEQ(t4_, e_.c32(0)), "store.partial.lse",
          [&] { B.CreateStore(lse(), B.CreateGEP(e_.f32(), arg(kParamPartialLse), at)); });
}

}  // namespace flashjit::fwd

// The forward's epilogue: O normalised by l and the LSE, or a split's fp32 partials.
#include <cmath>

#include "compiler/tile/gpu.hpp"
#include "compiler/tile/mma.hpp"
#include "compiler/tile/reduce.hpp"
#include "templates/common/forward_abi.hpp"
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
  for (size_t mt = 0; mt < o_.vars.size(); ++mt)
    for (int r = 0; r < 2; ++r) {
      Value* row = row_of(int(mt), 2 * r);
      Value* lsum = tile::quad_sum(e_, B.CreateLoad(e_.f32(), softmax_.l[mt][r]));
      Value* mrow = B.CreateLoad(e_.f32(), softmax_.m[mt][r]);
      e_.when(B.CreateICmpSLT(row, rows_), "store", [&] {
        Value* any = B.CreateFCmpOGT(lsum, e_.cf(0.f));
        Value* inv = B.CreateSelect(any, B.CreateFDiv(e_.cf(1.f), lsum), e_.cf(0.f));
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
        Value* row_ptr =
            B.CreateGEP(B.getInt16Ty(), o_base, tile::row_offset(e_, {nullptr, strides_[3][1], nullptr, nullptr, G, strides_[3][2]}, row));
        tile::store_row_pairs(e_, o_, mt, r, OT, inv, t4_, row_ptr, spec_.dtype);
        Value* has_lse = B.CreateICmpNE(lse_ptr, llvm::ConstantPointerNull::get(llvm::PointerType::get(e_.ctx, 1)));
        e_.when(B.CreateAnd(has_lse, B.CreateICmpEQ(t4_, e_.c32(0))), "store.lse",
                [&] { B.CreateStore(natural_lse(), B.CreateGEP(e_.f32(), lse_ptr, row_index())); });
      });
    }
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

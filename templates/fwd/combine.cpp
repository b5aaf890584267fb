#include "templates/fwd/combine.hpp"

#include <llvm/IR/Module.h>

#include <cmath>

#include "compiler/tile/gpu.hpp"
#include "compiler/tile/mma.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/common/kernel_args.hpp"

namespace flashjit {

namespace {

using llvm::Value;

Value* warp_reduce(tile::Emitter& e, Value* x, bool max) {
  for (int m = 16; m >= 1; m /= 2) {
    Value* y = tile::shfl_xor(e, x, m);
    x = max ? e.b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, x, y) : e.b.CreateFAdd(x, y);
  }
  return x;
}

}  // namespace

llvm::Function* emit_split_combine(llvm::Module& module, const ForwardPlan& plan, const std::string& entry) {
  llvm::Function* fn = declare_kernel(module, *plan.spec, {kCombineThreads, 1}, KernelTail::none, entry + "_combine");
  tile::Emitter e(module, fn);
  auto& B = e.b;
  B.SetInsertPoint(llvm::BasicBlock::Create(e.ctx, "entry", fn));
  const int d_v = plan.attention().head_dim_v;
  const float log2e = static_cast<float>(M_LOG2E);
  Value* tid = tile::thread_id(e);
  Value* lane = B.CreateAnd(tid, e.c32(31));
  Value* row = B.CreateAdd(B.CreateMul(tile::block_id(e, 0), e.c32(kCombineRowsPerCta)), B.CreateLShr(tid, 5));
  Value* head = tile::block_id(e, 1);
  Value* batch = tile::block_id(e, 2);
  Value* seq_q = fn->getArg(kParamSeqQ);
  Value* splits = fn->getArg(kParamSplits);
  auto i64 = [&](Value* v) { return B.CreateZExt(v, e.i64()); };

  // A warp's lanes share its row, so the shuffles below run with the whole warp or not at all.
  e.when(B.CreateICmpSLT(row, seq_q), "row", [&] {
    // Row index of [batch, heads_q, seq_q]; split s's copy is s · rows further.
    Value* idx = B.CreateAdd(B.CreateMul(B.CreateAdd(B.CreateMul(i64(batch), i64(tile::grid_dim(e, 1))), i64(head)),
                                         i64(seq_q)),
                             i64(row));
    Value* rows = B.CreateMul(B.CreateMul(i64(tile::grid_dim(e, 2)), i64(tile::grid_dim(e, 1))), i64(seq_q));
    auto split_lse = [&](Value* s) {
      Value* at = B.CreateAdd(B.CreateMul(i64(s), rows), idx);
      return B.CreateAlignedLoad(e.f32(), B.CreateGEP(e.f32(), fn->getArg(kParamPartialLse), at), llvm::Align(4));
    };
    // Max and sum of e^{LSE_s − max} over the splits, lanes striding across them.
    llvm::AllocaInst* m = e.var(e.f32(), "m", e.neg_inf());
    e.loop(lane, splits, 32, "max", [&](Value* s) {
      B.CreateStore(B.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, B.CreateLoad(e.f32(), m), split_lse(s)), m);
    });
    Value* m_row = warp_reduce(e, B.CreateLoad(e.f32(), m), /*max=*/true);
    // Every split empty (a fully masked row): −inf; shift by 0 so no −inf − −inf makes a NaN.
    Value* any = B.CreateFCmpOGT(m_row, e.neg_inf());
    Value* shift = B.CreateSelect(any, m_row, e.cf(0.f));
    llvm::AllocaInst* sum = e.var(e.f32(), "sum", e.cf(0.f));
    e.loop(lane, splits, 32, "sum", [&](Value* s) {
      Value* w = tile::exp2_fast(e, B.CreateFMul(B.CreateFSub(split_lse(s), shift), e.cf(log2e)));
      B.CreateStore(B.CreateFAdd(B.CreateLoad(e.f32(), sum), w), sum);
    });
    Value* total = warp_reduce(e, B.CreateLoad(e.f32(), sum), /*max=*/false);
    Value* lse = B.CreateSelect(any, B.CreateFAdd(m_row, B.CreateFMul(tile::log2_fast(e, total), e.cf(float(M_LN2)))),
                                e.neg_inf());

    // O: each lane owns column pairs 2·lane + 64·k; split s weighs e^{LSE_s − LSE} (0 when all are empty).
    Value* lse_shift = B.CreateSelect(any, lse, e.cf(0.f));
    Value* o_base = B.CreateGEP(
        B.getInt16Ty(), fn->getArg(kParamO),
        B.CreateAdd(B.CreateAdd(B.CreateMul(i64(batch), fn->getArg(kParamStrides + 9)),
                                B.CreateMul(B.CreateSExt(row, e.i64()), fn->getArg(kParamStrides + 10))),
                    B.CreateMul(i64(head), fn->getArg(kParamStrides + 11))));
    for (int c0 = 0; c0 < d_v; c0 += 64) {
      Value* col = B.CreateAdd(e.c32(c0), B.CreateShl(lane, 1));
      e.when(B.CreateICmpSLT(col, e.c32(d_v)), "col", [&] {
        llvm::AllocaInst* acc[2] = {e.var(e.f32(), "acc", e.cf(0.f)), e.var(e.f32(), "acc", e.cf(0.f))};
        e.loop(e.c32(0), splits, 1, "split", [&](Value* s) {
          Value* w = tile::exp2_fast(e, B.CreateFMul(B.CreateFSub(split_lse(s), lse_shift), e.cf(log2e)));
          w = B.CreateSelect(any, w, e.cf(0.f));
          Value* at = B.CreateMul(B.CreateAdd(B.CreateMul(i64(s), rows), idx), e.c64(d_v));
          Value* src = B.CreateGEP(e.f32(), fn->getArg(kParamPartialO), B.CreateAdd(at, i64(col)));
          Value* pair = B.CreateAlignedLoad(llvm::FixedVectorType::get(e.f32(), 2), src, llvm::Align(8));
          for (int i = 0; i < 2; ++i)
            B.CreateStore(B.CreateFAdd(B.CreateLoad(e.f32(), acc[i]), B.CreateFMul(w, B.CreateExtractElement(pair, i))),
                          acc[i]);
        });
        Value* packed = tile::pack_pair_rn(e, B.CreateLoad(e.f32(), acc[0]), B.CreateLoad(e.f32(), acc[1]),
                                           plan.attention().dtype);
        B.CreateAlignedStore(packed, B.CreateGEP(B.getInt16Ty(), o_base, i64(col)), llvm::Align(4));
      });
    }
    Value* lse_ptr = fn->getArg(kParamLse);
    Value* has_lse = B.CreateICmpNE(lse_ptr, llvm::ConstantPointerNull::get(llvm::PointerType::get(e.ctx, 1)));
    e.when(B.CreateAnd(has_lse, B.CreateICmpEQ(lane, e.c32(0))), "lse",
           [&] { B.CreateStore(lse, B.CreateGEP(e.f32(), lse_ptr, idx)); });
  });
  B.CreateRetVoid();
  return fn;
}

}  // namespace flashjit

#include "templates/fwd/combine.hpp"

#include <llvm/IR/Module.h>

#include <cmath>
#include <vector>

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
  const int warps = kCombineThreads / 32;
  const float log2e = static_cast<float>(M_LOG2E);
  Value* tid = tile::thread_id(e);
  Value* lane = B.CreateAnd(tid, e.c32(31));
  Value* warp = B.CreateLShr(tid, 5);
  Value* row = tile::block_id(e, 0);
  Value* head = tile::block_id(e, 1);
  Value* batch = tile::block_id(e, 2);
  Value* seq_q = fn->getArg(kParamSeqQ);
  Value* splits = fn->getArg(kParamSplits);
  auto i64 = [&](Value* v) { return B.CreateZExt(v, e.i64()); };
  // Shared floats: the splits' weights [kMaxSplits], the warps' maxima and sums [2 · warps], and
  // each warp's partial O [warps][d_v] (kCombineSharedBytes).
  Value* smem = tile::shared_base(e);
  auto shared = [&](int first, Value* i) {
    return B.CreateGEP(e.f32(), smem, B.CreateAdd(e.c32(first), i));
  };
  const int red = kMaxSplits, acc_at = kMaxSplits + 2 * warps;

  // Row index of [batch, heads_q, seq_q]; split s's copy is s · rows further.
  Value* idx = B.CreateAdd(B.CreateMul(B.CreateAdd(B.CreateMul(i64(batch), i64(tile::grid_dim(e, 1))), i64(head)),
                                       i64(seq_q)),
                           i64(row));
  Value* rows = B.CreateMul(B.CreateMul(i64(tile::grid_dim(e, 2)), i64(tile::grid_dim(e, 1))), i64(seq_q));
  auto at_split = [&](Value* s) { return B.CreateAdd(B.CreateMul(i64(s), rows), idx); };
  // The CTA's reduction of one value per thread: warp shuffles, then the warps' results in smem.
  auto block_reduce = [&](Value* x, bool max, int slot) {
    x = warp_reduce(e, x, max);
    e.when(B.CreateICmpEQ(lane, e.c32(0)), "reduce", [&] { B.CreateStore(x, shared(slot, warp)); });
    tile::sync_threads(e);
    Value* r = B.CreateLoad(e.f32(), shared(slot, e.c32(0)));
    for (int w = 1; w < warps; ++w) {
      Value* y = B.CreateLoad(e.f32(), shared(slot, e.c32(w)));
      r = max ? B.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, r, y) : B.CreateFAdd(r, y);
    }
    return r;
  };
  // Thread t holds split t's LSE (kMaxSplits = kCombineThreads: one each, loaded together).
  static_assert(kMaxSplits == kCombineThreads, "one split per combine thread");
  if (plan.dependent_launch) tile::wait_prerequisites(e);  // the split kernel's partials, visible
  Value* has = B.CreateICmpSLT(tid, splits);
  Value* l_ptr = B.CreateGEP(e.f32(), fn->getArg(kParamPartialLse), at_split(B.CreateSelect(has, tid, e.c32(0))));
  Value* l = B.CreateSelect(has, B.CreateAlignedLoad(e.f32(), l_ptr, llvm::Align(4)), e.neg_inf());
  Value* m_row = block_reduce(l, /*max=*/true, red);
  // Every split empty (a fully masked row): −inf; shift by 0 so no −inf − −inf makes a NaN.
  Value* any = B.CreateFCmpOGT(m_row, e.neg_inf());
  Value* shift = B.CreateSelect(any, m_row, e.cf(0.f));
  Value* w = tile::exp2_fast(e, B.CreateFMul(B.CreateFSub(l, shift), e.cf(log2e)));  // 0 for −inf
  Value* total = block_reduce(w, /*max=*/false, red + warps);
  Value* lse = B.CreateSelect(any, B.CreateFAdd(m_row, B.CreateFMul(tile::log2_fast(e, total), e.cf(float(M_LN2)))),
                              e.neg_inf());
  // Split s weighs e^{LSE_s − LSE} = w_s / Σ w (0 when every split is empty).
  B.CreateStore(B.CreateSelect(any, B.CreateFDiv(w, total), e.cf(0.f)), shared(0, tid));
  tile::sync_threads(e);

  // O: warp w sums splits w, w + warps, ...; lane owns column pairs 2·lane + 64·k. kUnroll splits
  // per step, their loads issued together (a clamped split index and weight 0 past the end):
  // the partials are read once, so the step's time is the memory latency, not the arithmetic.
  constexpr int kUnroll = 4;
  const int pairs = (d_v + 63) / 64;
  std::vector<llvm::AllocaInst*> acc;
  for (int i = 0; i < 2 * pairs; ++i) acc.push_back(e.var(e.f32(), "acc", e.cf(0.f)));
  Value* last = B.CreateSub(splits, e.c32(1));
  e.loop(warp, splits, warps * kUnroll, "split", [&](Value* s0) {
    std::vector<Value*> weights, loads;
    for (int u = 0; u < kUnroll; ++u) {
      Value* s = B.CreateAdd(s0, e.c32(u * warps));
      Value* in = B.CreateICmpSLT(s, splits);
      Value* sc = B.CreateSelect(in, s, last);
      weights.push_back(B.CreateSelect(in, B.CreateLoad(e.f32(), shared(0, sc)), e.cf(0.f)));
      Value* base = B.CreateMul(at_split(sc), e.c64(d_v));
      for (int k = 0; k < pairs; ++k) {
        Value* col = B.CreateAdd(e.c32(64 * k), B.CreateShl(lane, 1));
        Value* col_ok = B.CreateICmpSLT(col, e.c32(d_v));
        Value* src = B.CreateGEP(e.f32(), fn->getArg(kParamPartialO), B.CreateAdd(base, i64(B.CreateSelect(col_ok, col, e.c32(0)))));
        loads.push_back(B.CreateAlignedLoad(llvm::FixedVectorType::get(e.f32(), 2), src, llvm::Align(8)));
      }
    }
    for (int u = 0; u < kUnroll; ++u)
      for (int k = 0; k < pairs; ++k)
        for (int i = 0; i < 2; ++i) {
          llvm::AllocaInst* a = acc[size_t(2 * k + i)];
          Value* x = B.CreateExtractElement(loads[size_t(u * pairs + k)], i);
          B.CreateStore(B.CreateFAdd(B.CreateLoad(e.f32(), a), B.CreateFMul(weights[size_t(u)], x)), a);
        }
  });
  for (int k = 0; k < pairs; ++k) {
    Value* col = B.CreateAdd(e.c32(64 * k), B.CreateShl(lane, 1));
    e.when(B.CreateICmpSLT(col, e.c32(d_v)), "col", [&] {
      for (int i = 0; i < 2; ++i)
        B.CreateStore(B.CreateLoad(e.f32(), acc[size_t(2 * k + i)]),
                      shared(acc_at, B.CreateAdd(B.CreateMul(warp, e.c32(d_v)), B.CreateAdd(col, e.c32(i)))));
    });
  }
  tile::sync_threads(e);
  // Thread t finishes column pairs t, t + kCombineThreads, ...: the warps' partials summed in a fixed order.
  Value* o_base = B.CreateGEP(
      B.getInt16Ty(), fn->getArg(kParamO),
      B.CreateAdd(B.CreateAdd(B.CreateMul(i64(batch), fn->getArg(kParamStrides + 9)),
                              B.CreateMul(B.CreateSExt(row, e.i64()), fn->getArg(kParamStrides + 10))),
                  B.CreateMul(i64(head), fn->getArg(kParamStrides + 11))));
  for (int p0 = 0; p0 < d_v / 2; p0 += kCombineThreads) {
    Value* col = B.CreateShl(B.CreateAdd(tid, e.c32(p0)), 1);
    e.when(B.CreateICmpSLT(col, e.c32(d_v)), "out", [&] {
      Value* o[2];
      for (int i = 0; i < 2; ++i) {
        o[i] = B.CreateLoad(e.f32(), shared(acc_at, B.CreateAdd(col, e.c32(i))));
        for (int wv = 1; wv < warps; ++wv)
          o[i] = B.CreateFAdd(o[i], B.CreateLoad(e.f32(), shared(acc_at + wv * d_v, B.CreateAdd(col, e.c32(i)))));
      }
      B.CreateAlignedStore(tile::pack_pair_rn(e, o[0], o[1], plan.attention().dtype),
                           B.CreateGEP(B.getInt16Ty(), o_base, i64(col)), llvm::Align(4));
    });
  }
  Value* lse_ptr = fn->getArg(kParamLse);
  Value* has_lse = B.CreateICmpNE(lse_ptr, llvm::ConstantPointerNull::get(llvm::PointerType::get(e.ctx, 1)));
  e.when(B.CreateAnd(has_lse, B.CreateICmpEQ(tid, e.c32(0))), "lse",
         [&] { B.CreateStore(lse, B.CreateGEP(e.f32(), lse_ptr, idx)); });
  B.CreateRetVoid();
  return fn;
}

}  // namespace flashjit

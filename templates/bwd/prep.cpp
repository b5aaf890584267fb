// The backward's pre-pass: D_i = rowsum(dO_i ∘ O_i) in fp32 (FlashAttention-2, Dao 2023,
// Algorithm 2, line 4: the term dS = P ∘ (dP − D) subtracts). One warp per row, each lane a pair
// of columns at a time, a butterfly sum at the end.
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>

#include "compiler/tile/gpu.hpp"
#include "templates/bwd/backward.hpp"
#include "templates/common/backward_abi.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/common/kernel_args.hpp"

namespace flashjit {

void emit_backward_prep(llvm::Module& module, const BackwardPlan& plan, const std::string& name) {
  using llvm::Value;
  llvm::Function* fn = declare_kernel(module, *plan.spec, {kPrepThreads, 1}, KernelTail::backward, name);
  tile::Emitter e(module, fn);
  auto& B = e.b;
  B.SetInsertPoint(llvm::BasicBlock::Create(e.ctx, "entry", fn));
  const AttentionSpec& spec = plan.attention();
  const int d_v = spec.head_dim_v;
  const int warps = kPrepThreads / 32, rows_per_warp = kPrepRows / warps;
  Value* tid = tile::thread_id(e);
  Value* warp = B.CreateLShr(tid, 5);
  Value* lane = B.CreateAnd(tid, e.c32(31));
  Value* head = tile::block_id(e, 1);
  Value* batch = tile::block_id(e, 2);
  Value* heads_q =
      B.CreateCall(llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y));
  Value* seq_q = fn->getArg(kParamSeqQ);
  auto slice = [&](Value* ptr, int stride0) {
    Value* off = B.CreateAdd(B.CreateMul(B.CreateZExt(batch, e.i64()), fn->getArg(unsigned(stride0))),
                             B.CreateMul(B.CreateZExt(head, e.i64()), fn->getArg(unsigned(stride0 + 2))));
    return B.CreateGEP(B.getInt16Ty(), ptr, off);
  };
  const unsigned bwd0 = unsigned(kParamCount + plan.spec->dsl.params.size() + plan.spec->dsl.tensors.size());
  Value* o = slice(fn->getArg(kParamO), kParamStrides + 9);
  Value* d_o = slice(fn->getArg(bwd0 + kBwdDo), int(bwd0) + kBwdStrides);
  Value* o_row_stride = fn->getArg(kParamStrides + 10);
  Value* do_row_stride = fn->getArg(bwd0 + kBwdStrides + 1);
  Value* delta = fn->getArg(bwd0 + kBwdDelta);
  // Two 16-bit elements → two f32 (bf16: the high half of an f32; f16: a conversion).
  auto widen = [&](Value* pair, int half) -> Value* {
    if (spec.dtype == DType::bf16) {
      Value* bits = half ? B.CreateAnd(pair, e.c32(static_cast<int>(0xFFFF0000u))) : B.CreateShl(pair, 16);
      return B.CreateBitCast(bits, e.f32());
    }
    Value* h16 = B.CreateTrunc(half ? B.CreateLShr(pair, 16) : pair, B.getInt16Ty());
    return B.CreateFPExt(B.CreateBitCast(h16, B.getHalfTy()), e.f32());
  };
  for (int r = 0; r < rows_per_warp; ++r) {
    Value* row = B.CreateAdd(B.CreateMul(tile::block_id(e, 0), e.c32(kPrepRows)),
                             B.CreateAdd(B.CreateMul(warp, e.c32(rows_per_warp)), e.c32(r)));
    e.when(B.CreateICmpSLT(row, seq_q), "row", [&] {
      Value* row64 = B.CreateSExt(row, e.i64());
      Value* o_row = B.CreateGEP(B.getInt16Ty(), o, B.CreateMul(row64, o_row_stride));
      Value* do_row = B.CreateGEP(B.getInt16Ty(), d_o, B.CreateMul(row64, do_row_stride));
      Value* sum = e.cf(0.f);
      for (int c = 0; c < d_v; c += 64) {
        Value* col = B.CreateAdd(e.c32(c), B.CreateShl(lane, 1));
        llvm::AllocaInst* part = e.var(e.f32(), "part", e.cf(0.f));
        B.CreateStore(e.cf(0.f), part);
        e.when(B.CreateICmpSLT(col, e.c32(d_v)), "cols", [&] {
          Value* a = B.CreateAlignedLoad(e.i32(), B.CreateGEP(B.getInt16Ty(), o_row, col), llvm::Align(4));
          Value* b = B.CreateAlignedLoad(e.i32(), B.CreateGEP(B.getInt16Ty(), do_row, col), llvm::Align(4));
          Value* lo = B.CreateFMul(widen(a, 0), widen(b, 0));
          B.CreateStore(B.CreateIntrinsic(llvm::Intrinsic::fma, {e.f32()}, {widen(a, 1), widen(b, 1), lo}), part);
        });
        sum = B.CreateFAdd(sum, B.CreateLoad(e.f32(), part));
      }
      for (int m = 16; m >= 1; m /= 2) sum = B.CreateFAdd(sum, tile::shfl_xor(e, sum, m));
      e.when(B.CreateICmpEQ(lane, e.c32(0)), "store", [&] {
        Value* idx = B.CreateAdd(B.CreateMul(B.CreateZExt(batch, e.i64()), B.CreateZExt(heads_q, e.i64())),
                                 B.CreateZExt(head, e.i64()));
        idx = B.CreateAdd(B.CreateMul(idx, B.CreateSExt(seq_q, e.i64())), row64);
        B.CreateStore(sum, B.CreateGEP(e.f32(), delta, idx));
      });
    });
  }
  B.CreateRetVoid();
}

}  // namespace flashjit

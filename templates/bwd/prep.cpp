// The backward's row kernels, one warp per query row, each lane a pair of columns at a time: the
// pre-pass D_i = rowsum(dO_i ∘ O_i) in fp32 (FlashAttention-2, Dao 2023, Algorithm 2, line 4: dS =
// P ∘ (dP − D) subtracts it), and the conversion of a dQ summed in fp32 to the dtype.
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>

#include <cmath>
#include <functional>

#include "compiler/tile/gpu.hpp"
#include "compiler/tile/mma.hpp"
#include "templates/bwd/backward.hpp"
#include "templates/bwd/dq_sum.hpp"
#include "templates/common/backward_abi.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/common/kernel_args.hpp"

namespace flashjit {

namespace {

using llvm::Value;

// What a row kernel's body sees: the (batch, head) slice, and for one row its index and
// lane-pair column.
class RowKernel {
 public:
  RowKernel(llvm::Module& module, const BackwardPlan& plan, const std::string& name)
      : plan_(plan),
        fn_(declare_kernel(module, *plan.spec, {kPrepThreads, 1}, KernelTail::backward, name)),
        e_(module, fn_) {
    auto& B = e_.b;
    B.SetInsertPoint(llvm::BasicBlock::Create(e_.ctx, "entry", fn_));
    Value* tid = tile::thread_id(e_);
    warp_ = B.CreateLShr(tid, 5);
    lane_ = B.CreateAnd(tid, e_.c32(31));
    head_ = tile::block_id(e_, 1);
    batch_ = tile::block_id(e_, 2);
    Value* heads_q =
        B.CreateCall(llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y));
    seq_q_ = fn_->getArg(kParamSeqQ);
    // Row 0 of this (batch, head) in the [batch, heads_q, seq_q] statistics.
    stats_ = B.CreateMul(B.CreateAdd(B.CreateMul(B.CreateZExt(batch_, e_.i64()), B.CreateZExt(heads_q, e_.i64())),
                                     B.CreateZExt(head_, e_.i64())),
                         B.CreateSExt(seq_q_, e_.i64()));
    batch_head_ = B.CreateAdd(B.CreateMul(batch_, heads_q), head_);
  }

  tile::Emitter& e() { return e_; }
  Value* bwd(int i) const { return backward_arg(fn_, *plan_.spec, i); }
  Value* arg(int i) const { return fn_->getArg(unsigned(i)); }
  Value* stats() const { return stats_; }
  Value* batch_head() const { return batch_head_; }  // i32: batch · heads_q + head
  Value* lane() const { return lane_; }

  // Element 0 of row `row` of a [batch, seq, head, d] tensor (16-bit elements) from its strides.
  Value* row_ptr(Value* base, Value* const strides[3], Value* row) {
    auto& B = e_.b;
    Value* off = B.CreateAdd(B.CreateMul(B.CreateZExt(batch_, e_.i64()), strides[0]),
                             B.CreateMul(B.CreateZExt(head_, e_.i64()), strides[2]));
    off = B.CreateAdd(off, B.CreateMul(B.CreateSExt(row, e_.i64()), strides[1]));
    return B.CreateGEP(B.getInt16Ty(), base, off);
  }

  // body(row, col) for every row below seq_q of this CTA's kPrepRows and every column pair
  // (col, col + 1) below d of it: a warp per row, a lane per pair.
  void for_each_pair(int d, const std::function<void(Value*, Value*)>& body, const std::function<void(Value*)>& row_end) {
    auto& B = e_.b;
    const int rows_per_warp = kPrepRows / (kPrepThreads / 32);
    for (int r = 0; r < rows_per_warp; ++r) {
      Value* row = B.CreateAdd(B.CreateMul(tile::block_id(e_, 0), e_.c32(kPrepRows)),
                               B.CreateAdd(B.CreateMul(warp_, e_.c32(rows_per_warp)), e_.c32(r)));
      e_.when(B.CreateICmpSLT(row, seq_q_), "row", [&] {  // warp-uniform
        for (int c = 0; c < d; c += 64) {
          Value* col = B.CreateAdd(e_.c32(c), B.CreateShl(lane_, 1));
          e_.when(B.CreateICmpSLT(col, e_.c32(d)), "cols", [&] { body(row, col); });
        }
        row_end(row);
      });
    }
  }

  void finish() { e_.b.CreateRetVoid(); }

 private:
  const BackwardPlan& plan_;
  llvm::Function* fn_;
  tile::Emitter e_;
  Value *warp_, *lane_, *head_, *batch_, *seq_q_, *stats_, *batch_head_;
};

}  // namespace

void emit_backward_prep(llvm::Module& module, const BackwardPlan& plan, const std::string& name) {
  RowKernel k(module, plan, name);
  tile::Emitter& e = k.e();
  auto& B = e.b;
  const AttentionSpec& spec = plan.attention();
  Value* o_strides[3] = {k.arg(kParamStrides + 9), k.arg(kParamStrides + 10), k.arg(kParamStrides + 11)};
  Value* do_strides[3] = {k.bwd(kBwdStrides), k.bwd(kBwdStrides + 1), k.bwd(kBwdStrides + 2)};
  auto widen = [&](Value* pair, int half) { return tile::unpack_half(e, pair, half, spec.dtype); };
  llvm::AllocaInst* sum = e.var(e.f32(), "sum", e.cf(0.f));
  B.CreateStore(e.cf(0.f), sum);
  k.for_each_pair(
      spec.head_dim_v,
      [&](Value* row, Value* col) {
        Value* a = B.CreateAlignedLoad(e.i32(), B.CreateGEP(B.getInt16Ty(), k.row_ptr(k.arg(kParamO), o_strides, row), col),
                                       llvm::Align(4));
        Value* b = B.CreateAlignedLoad(e.i32(), B.CreateGEP(B.getInt16Ty(), k.row_ptr(k.bwd(kBwdDo), do_strides, row), col),
                                       llvm::Align(4));
        Value* lo = B.CreateIntrinsic(llvm::Intrinsic::fma, {e.f32()}, {widen(a, 0), widen(b, 0), B.CreateLoad(e.f32(), sum)});
        B.CreateStore(B.CreateIntrinsic(llvm::Intrinsic::fma, {e.f32()}, {widen(a, 1), widen(b, 1), lo}), sum);
      },
      [&](Value* row) {
        Value* total = B.CreateLoad(e.f32(), sum);
        for (int m = 16; m >= 1; m /= 2) total = B.CreateFAdd(total, tile::shfl_xor(e, total, m));
        B.CreateStore(e.cf(0.f), sum);
        e.when(B.CreateICmpEQ(k.lane(), e.c32(0)), "store", [&] {
          B.CreateStore(total, B.CreateGEP(e.f32(), k.bwd(kBwdDelta), B.CreateAdd(k.stats(), B.CreateSExt(row, e.i64()))));
        });
      });
  k.finish();
}

void emit_backward_dq_convert(llvm::Module& module, const BackwardPlan& plan, const std::string& name) {
  RowKernel k(module, plan, name);
  tile::Emitter& e = k.e();
  auto& B = e.b;
  const AttentionSpec& spec = plan.attention();
  const int d = spec.head_dim_qk;
  Value* dq_strides[3] = {k.bwd(kBwdStrides + 3), k.bwd(kBwdStrides + 4), k.bwd(kBwdStrides + 5)};
  // The workspace holds Σ dS K; dQ is scale times it, as the dQ kernel's store applies it.
  Value* scale = B.CreateFMul(k.arg(kParamScaleLog2), e.cf(static_cast<float>(M_LN2)));
  k.for_each_pair(
      d,
      [&](Value* row, Value* col) {
        // Element (r, c) = (row % 64, col % 64) of the workspace's block (batch, head, row / 64,
        // col / 64) is register 4·(c / 8) + 2·((r / 8) % 2) + c % 2 of the warpgroup's thread
        // 32·(r / 16) + 4·(r % 8) + (c % 8) / 2 (templates/common/backward_abi.hpp).
        Value* r = B.CreateAnd(row, e.c32(63));
        Value* c = B.CreateAnd(col, e.c32(63));
        Value* t = B.CreateAdd(B.CreateShl(B.CreateLShr(r, 4), 5),
                               B.CreateAdd(B.CreateShl(B.CreateAnd(r, e.c32(7)), 2), B.CreateAnd(B.CreateLShr(c, 1), e.c32(3))));
        Value* in_block = B.CreateAdd(B.CreateShl(B.CreateAdd(B.CreateShl(B.CreateLShr(c, 3), 7), t), 2),
                                      B.CreateShl(B.CreateAnd(B.CreateLShr(r, 3), e.c32(1)), 1));
        Value* block = dq_block_offset(e, k.batch_head(), k.arg(kParamSeqQ), B.CreateLShr(row, 6), (d + 63) / 64,
                                       B.CreateLShr(col, 6));
        Value* at = B.CreateAdd(block, B.CreateZExt(in_block, e.i64()));
        auto* pair_type = llvm::FixedVectorType::get(e.f32(), 2);
        Value* pair = B.CreateAlignedLoad(pair_type, B.CreateGEP(e.f32(), k.bwd(kBwdDqAccum), at), llvm::Align(8));
        Value* x = B.CreateFMul(B.CreateExtractElement(pair, uint64_t(0)), scale);
        Value* y = B.CreateFMul(B.CreateExtractElement(pair, uint64_t(1)), scale);
        B.CreateAlignedStore(tile::pack_pair_rn(e, x, y, spec.dtype),
                             B.CreateGEP(B.getInt16Ty(), k.row_ptr(k.bwd(kBwdDq), dq_strides, row), col), llvm::Align(4));
      },
      [](Value*) {});
  k.finish();
}

}  // namespace flashjit

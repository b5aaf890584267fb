// The dK/dV kernel with its two warpgroups on one key tile (BackwardPlan::warpgroup_split), as
// FlashAttention-3's backward (Shah et al. 2024, §3.3) divides one key tile's products between
// warpgroups: the first computes S = K Qᵀ, P and dV += Pᵀ dO, the second dP = V dOᵀ (issued at
// once, so it runs under the first's softmax), dS = P ∘ (dP − D) and dK += dSᵀ Q. Each holds
// one d-wide accumulator, where one warpgroup could not hold both above d = 128, and S is
// computed once per tile instead of once per launch of a split plan. P, rounded to the dtype as
// the one-warpgroup kernel rounds it and times the score's derivative, goes from the first to the
// second through shared memory: both warpgroups hold the same 64 rows in the same m16n8 layout,
// so each thread reads back what its counterpart wrote.
#include <cmath>

#include "compiler/tile/gpu.hpp"
#include "compiler/tile/mma.hpp"
#include "templates/bwd/backward_kernel.hpp"

namespace flashjit::bwd {

// The warpgroups walk the same heads and tiles in loops of their own, so that each keeps only its
// accumulator live (one loop holding both would need d_qk + d_v per thread). The CTA barriers
// of the walk (walk_tiles) are met the same number of times by both.
void BackwardKernel::run_roles(const std::function<void()>& walk_and_store) {
  auto& B = e_.b;
  const Outputs both = out_;
  llvm::BasicBlock* dv = llvm::BasicBlock::Create(e_.ctx, "role.dv", fn_);
  llvm::BasicBlock* dk = llvm::BasicBlock::Create(e_.ctx, "role.dk", fn_);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(e_.ctx, "role.done", fn_);
  B.CreateCondBr(B.CreateICmpULT(warp_, e_.c32(4)), dv, dk);
  for (llvm::BasicBlock* role : {dv, dk}) {
    B.SetInsertPoint(role);
    out_ = role == dv ? Outputs{.dv = true} : Outputs{.dk = true};
    walk_and_store();
    B.CreateBr(done);
  }
  out_ = both;
  B.SetInsertPoint(done);
}

// Word (mt, nt, i) of every thread of a warpgroup side by side: 128 consecutive words per element,
// so a warp's accesses fall in 32 different banks.
Value* BackwardKernel::shared_p(int mt, int nt, int i) {
  auto& B = e_.b;
  const int k = (mt * NT + nt) * 4 + i;
  Value* word = B.CreateAdd(e_.c32(k * 128), B.CreateAnd(tid_, e_.c32(127)));
  Value* addr = B.CreateAdd(B.CreateAdd(smem_, e_.c32(P_.p_share)), B.CreateShl(word, 2));
  if (p_buffer_) addr = B.CreateAdd(addr, p_buffer_);
  return B.CreateIntToPtr(addr, llvm::PointerType::get(e_.ctx, 3));
}

void BackwardKernel::step_dv(Value* first, Value* entry, const SmemTile& str_qk, const SmemTile& str_v) {
  auto& B = e_.b;
  RegTile grad;
  if (plan_.spec->score) grad = tile::zero_tile(e_, P_.m_tiles, NT);
  RegTile p = probabilities(tc_a_->mma_abt(e_, str_qk), first, entry, &grad);  // S = K Qᵀ
  RegTile handed = p;
  tile::round_tile(e_, handed, spec_.dtype);
  for (int mt = 0; mt < P_.m_tiles; ++mt)
    for (int nt = 0; nt < NT; ++nt)
      for (int i = 0; i < 4; ++i) {
        Value* x = handed[mt][nt][i];
        if (plan_.spec->score) x = B.CreateFMul(x, grad[mt][nt][i]);
        B.CreateAlignedStore(x, shared_p(mt, nt, i), llvm::Align(4));
      }
  // The second warpgroup reads P after this barrier; it has read this tile's P before the walk's
  // CTA barrier that ends the step, which this warpgroup passes before it writes the next. With a
  // producer there is no such barrier: P alternates between two buffers, and this warpgroup
  // rewrites one only after the next step's barrier here, which the other reaches once it has read it.
  tile::sync_named(e_, kPShared, P_.compute_threads);
  RegTile acc = acc_a_.load(e_);  // dV += Pᵀ dO
  tc_a_->mma_pv(e_, acc, p, str_v);
  acc_a_.store(e_, acc);
}

void BackwardKernel::step_dk(const SmemTile& str_qk, const SmemTile& str_v) {
  auto& B = e_.b;
  RegTile dp = tc_b_->mma_abt_async(e_, str_v);  // dP = V dOᵀ
  tile::sync_named(e_, kPShared, P_.compute_threads);
  RegTile p = tile::zero_tile(e_, P_.m_tiles, NT);
  for (int mt = 0; mt < P_.m_tiles; ++mt)
    for (int nt = 0; nt < NT; ++nt)
      for (int i = 0; i < 4; ++i) p[mt][nt][i] = B.CreateAlignedLoad(e_.f32(), shared_p(mt, nt, i), llvm::Align(4));
  tc_b_->wait(e_, dp, 0);
  for (int mt = 0; mt < P_.m_tiles; ++mt)
    for (int nt = 0; nt < NT; ++nt)
      for (int i = 0; i < 4; ++i)
        dp[mt][nt][i] = B.CreateFMul(p[mt][nt][i], B.CreateFSub(dp[mt][nt][i], row_stat(true, mt, nt, i)));
  RegTile acc = acc_b_.load(e_);  // dK += dSᵀ Q
  tc_b_->mma_pv(e_, acc, dp, str_qk);
  acc_b_.store(e_, acc);
}

}  // namespace flashjit::bwd

#include "compiler/tile/softmax.hpp"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "compiler/tile/gpu.hpp"
#include "compiler/tile/reduce.hpp"

namespace flashjit::tile {

void online_softmax(Emitter& e, RegTile& s, llvm::Value* multiplier, const SoftmaxRows& rows, const TileVars& o,
                    float grow_at) {
  using llvm::Value;
  auto& B = e.b;
  auto fma = [&](Value* a, Value* b, Value* c) { return B.CreateIntrinsic(llvm::Intrinsic::fma, {e.f32()}, {a, b, c}); };
  auto rescale = [&](const std::array<llvm::AllocaInst*, 4>& acc, int r, Value* alpha) {
    for (int c = 0; c < 2; ++c)
      B.CreateStore(B.CreateFMul(B.CreateLoad(e.f32(), acc[2 * r + c]), alpha), acc[2 * r + c]);
  };
  std::vector<std::array<Value*, 2>> alphas(s.size());
  Value* any_grew = B.getFalse();
  for (size_t mt = 0; mt < s.size(); ++mt)
    for (int r = 0; r < 2; ++r) {
      Value* mx = e.neg_inf();
      for (const Acc4& t : s[mt]) mx = B.CreateMaxNum(mx, B.CreateMaxNum(t[2 * r], t[2 * r + 1]));
      Value* m_old = B.CreateLoad(e.f32(), rows.m[mt][r]);
      Value* m_new = B.CreateMaxNum(m_old, quad_max(e, mx));
      Value* grew = nullptr;
      if (grow_at > 0) {  // −inf − −inf is NaN: a row masked so far compares false and keeps −inf
        grew = B.CreateFCmpOGT(B.CreateFMul(B.CreateFSub(m_new, m_old), multiplier), e.cf(grow_at));
        m_new = B.CreateSelect(grew, m_new, m_old);
        any_grew = B.CreateOr(any_grew, grew);
      }
      Value* m_use = B.CreateSelect(B.CreateFCmpOEQ(m_new, e.neg_inf()), e.cf(0.f), m_new);
      Value* neg_ms = B.CreateFNeg(B.CreateFMul(m_use, multiplier));
      Value* alpha = exp2_fast(e, fma(m_old, multiplier, neg_ms));
      if (grew) alpha = B.CreateSelect(grew, alpha, e.cf(1.f));  // exactly 1: the row keeps its max
      alphas[mt][r] = alpha;
      Value* sum = e.cf(0.f);
      for (Acc4& t : s[mt])
        for (int c = 0; c < 2; ++c) {
          Value*& x = t[2 * r + c];
          x = exp2_fast(e, fma(x, multiplier, neg_ms));
          sum = B.CreateFAdd(sum, x);
        }
      B.CreateStore(m_new, rows.m[mt][r]);
      B.CreateStore(B.CreateFAdd(B.CreateFMul(B.CreateLoad(e.f32(), rows.l[mt][r]), alpha), sum), rows.l[mt][r]);
      if (grow_at > 0) continue;
      for (const auto& acc : o.vars[mt]) rescale(acc, r, alpha);
    }
  if (grow_at <= 0) return;
  Value* warp_grew = B.CreateCall(llvm::Intrinsic::getDeclaration(&e.module, llvm::Intrinsic::nvvm_vote_any_sync),
                                  {e.c32(-1), any_grew});
  e.when(warp_grew, "rescale", [&] {
    for (size_t mt = 0; mt < s.size(); ++mt)
      for (const auto& acc : o.vars[mt])
        for (int r = 0; r < 2; ++r) rescale(acc, r, alphas[mt][r]);
  });
}

}  // namespace flashjit::tile

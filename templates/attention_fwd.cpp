// Scalar (CUDA-core) version. A CTA owns block_m query rows, a warp rows_per_warp of them. Per
// K/V tile of block_n keys, staged in shared memory by the whole CTA:
//   S: lane l scores keys l, l+32, … against each of its warp's rows (Q read from shared memory
//      as a broadcast, K rows padded so 32 lanes reading 32 rows hit 32 banks);
//   softmax: row max and sum by warp butterflies, in the exp2 domain with the scale folded into Q
//      (FlashAttention-2 §3.1): new max m', l and the accumulator rescaled by 2^(m − m');
//   PV: P goes through shared memory to the whole warp; lane l owns output pairs l, l+32, ….
// One division by l at the end. Rows whose keys are all masked keep m = −inf; using 0 as the max
// then keeps 2^(s − m) at 0 instead of NaN, and the epilogue writes O = 0, LSE = −inf for them.
// The tile primitives (compiler/tile) are the units a tensor-core template replaces: the copy,
// the S = QKᵀ product and the O += PV update.
#include "templates/attention_fwd.hpp"

#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>

#include <cmath>
#include <vector>

#include "compiler/tile/convert.hpp"
#include "compiler/tile/copy.hpp"
#include "compiler/tile/emitter.hpp"
#include "compiler/tile/gpu.hpp"
#include "compiler/tile/reduce.hpp"
#include "templates/forward_abi.hpp"

namespace flashjit {

namespace {

using tile::Emitter;
using llvm::Value;

llvm::Function* declare_kernel(llvm::Module& m, const ForwardPlan& plan) {
  auto& ctx = m.getContext();
  auto* gptr = llvm::PointerType::get(ctx, 1);
  std::vector<llvm::Type*> params(kParamCount);
  for (int i = kParamQ; i <= kParamLse; ++i) params[i] = gptr;
  for (int i = 0; i < 12; ++i) params[kParamStrides + i] = llvm::Type::getInt64Ty(ctx);
  params[kParamSeqQ] = params[kParamSeqKv] = params[kParamGroup] = llvm::Type::getInt32Ty(ctx);
  params[kParamScaleLog2] = llvm::Type::getFloatTy(ctx);
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), params, false);
  auto* fn = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, plan.entry, m);
  fn->setCallingConv(llvm::CallingConv::PTX_Kernel);
  for (int i = kParamQ; i <= kParamV; ++i) {
    fn->addParamAttr(i, llvm::Attribute::NoAlias);
    fn->addParamAttr(i, llvm::Attribute::ReadOnly);
  }
  fn->addParamAttr(kParamO, llvm::Attribute::NoAlias);
  fn->addParamAttr(kParamLse, llvm::Attribute::NoAlias);
  // Launch bounds (NVVM IR spec, "nvvm.annotations": maxntidx) let ptxas budget registers per thread.
  auto* i32 = llvm::Type::getInt32Ty(ctx);
  llvm::NamedMDNode* ann = m.getOrInsertNamedMetadata("nvvm.annotations");
  ann->addOperand(llvm::MDNode::get(ctx, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx, "kernel"),
                                          llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i32, 1))}));
  ann->addOperand(llvm::MDNode::get(ctx, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx, "maxntidx"),
                                          llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i32, plan.threads))}));
  return fn;
}

// Element offset of [batch, seq, head] in a tensor from its three strides.
Value* slice_offset(Emitter& e, Value* strides[3], Value* b, Value* s, Value* h) {
  auto& B = e.b;
  Value* off = B.CreateMul(B.CreateZExt(b, e.i64()), strides[0]);
  off = B.CreateAdd(off, B.CreateMul(B.CreateSExt(s, e.i64()), strides[1]));
  return B.CreateAdd(off, B.CreateMul(B.CreateZExt(h, e.i64()), strides[2]));
}

struct Row {
  Value* q_index;                       // i32 query position
  Value* valid;                         // q_index < seq_q
  llvm::AllocaInst* m;                  // running max, log2 domain
  llvm::AllocaInst* l;                  // running sum of 2^(s − m)
  std::vector<llvm::AllocaInst*> acc;   // pairs_v × 2 unnormalised output elements
};

}  // namespace

llvm::Function* emit_attention_forward(llvm::Module& module, const ForwardPlan& plan) {
  llvm::Function* fn = declare_kernel(module, plan);
  Emitter e(module, fn);
  auto& B = e.b;
  B.SetInsertPoint(llvm::BasicBlock::Create(e.ctx, "entry", fn));

  const int d_qk = plan.spec.head_dim_qk, d_v = plan.spec.head_dim_v;
  const int BN = plan.config.block_n, BM = plan.config.block_m, R = plan.rows_per_warp, KPL = plan.keys_per_lane;
  const DType dt = plan.spec.dtype;
  auto arg = [&](int i) -> Value* { return fn->getArg(i); };
  Value* strides[4][3];
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 3; ++i) strides[t][i] = arg(kParamStrides + 3 * t + i);
  Value* seq_q = arg(kParamSeqQ);
  Value* seq_kv = arg(kParamSeqKv);
  Value* scale_log2 = arg(kParamScaleLog2);

  Value* tid = tile::thread_id(e);
  Value* warp = B.CreateUDiv(tid, e.c32(32));
  Value* lane = B.CreateURem(tid, e.c32(32));
  Value* q_tile = tile::block_id(e, 0);
  Value* head = tile::block_id(e, 1);
  Value* batch = tile::block_id(e, 2);
  Value* head_kv = B.CreateUDiv(head, arg(kParamGroup));  // GQA/MQA: query heads share a K/V head
  Value* zero = e.c32(0);

  auto base = [&](int param, int t, Value* h) {
    return B.CreateGEP(B.getInt16Ty(), arg(param), slice_offset(e, strides[t], batch, zero, h));
  };
  Value* q_base = base(kParamQ, 0, head);
  Value* k_base = base(kParamK, 1, head_kv);
  Value* v_base = base(kParamV, 2, head_kv);
  Value* o_base = base(kParamO, 3, head);

  Value* smem = tile::shared_base(e);
  auto region = [&](int offset) { return B.CreateGEP(B.getInt8Ty(), smem, e.c32(offset)); };
  Value* q_smem = region(plan.smem.q);
  Value* k_smem = region(plan.smem.k);
  Value* v_smem = region(plan.smem.v);
  Value* p_smem = B.CreateGEP(e.f32(), region(plan.smem.p), B.CreateMul(warp, e.c32(R * BN)));

  Value* q_start = B.CreateMul(q_tile, e.c32(BM));
  // Q tile → shared memory as f32 pre-multiplied by scale·log2(e); rows past seq_q become zeros.
  {
    const int pairs = BM * d_qk / 2;
    for (int first = 0; first < pairs; first += plan.threads) {
      Value* idx = B.CreateAdd(tid, e.c32(first));
      e.when(B.CreateICmpULT(idx, e.c32(pairs)), "qload", [&] {
        Value* r = B.CreateUDiv(idx, e.c32(d_qk / 2));
        Value* c = B.CreateURem(idx, e.c32(d_qk / 2));
        Value* row = B.CreateAdd(q_start, r);
        Value* ok = B.CreateICmpSLT(row, seq_q);
        Value* safe = B.CreateSelect(ok, row, zero);
        Value* off = B.CreateAdd(B.CreateMul(B.CreateSExt(safe, e.i64()), strides[0][1]),
                                 B.CreateMul(B.CreateZExt(c, e.i64()), e.c64(2)));
        Value* bits = B.CreateAlignedLoad(e.i32(), B.CreateGEP(B.getInt16Ty(), q_base, off), llvm::Align(4));
        bits = B.CreateSelect(ok, bits, zero);
        auto [x, y] = tile::unpack_pair(e, bits, dt);
        Value* dst = B.CreateGEP(e.f32(), q_smem, B.CreateMul(idx, e.c32(2)));
        B.CreateAlignedStore(B.CreateFMul(x, scale_log2), dst, llvm::Align(8));
        B.CreateAlignedStore(B.CreateFMul(y, scale_log2), B.CreateGEP(e.f32(), dst, e.c32(1)), llvm::Align(4));
      });
    }
  }

  // Top-left causal (q >= kv): no key past the tile's last query row is ever visible.
  Value* kv_end = seq_kv;
  if (plan.causal) kv_end = B.CreateBinaryIntrinsic(llvm::Intrinsic::smin, seq_kv, B.CreateAdd(q_start, e.c32(BM)));

  std::vector<Row> rows(R);
  for (int r = 0; r < R; ++r) {
    Row& row = rows[r];
    row.q_index = B.CreateAdd(q_start, B.CreateAdd(B.CreateMul(warp, e.c32(R)), e.c32(r)));
    row.valid = B.CreateICmpSLT(row.q_index, seq_q);
    row.m = e.var(e.f32(), "m", e.neg_inf());
    row.l = e.var(e.f32(), "l", e.cf(0.f));
    for (int i = 0; i < 2 * plan.pairs_v; ++i) row.acc.push_back(e.var(e.f32(), "acc", e.cf(0.f)));
  }
  // s[r][k]: this lane's scores for key lane + 32k of the tile, for each of the warp's rows.
  std::vector<std::vector<llvm::AllocaInst*>> s(R, std::vector<llvm::AllocaInst*>(KPL));
  for (auto& row : s)
    for (auto& slot : row) slot = e.var(e.f32(), "s");
  Value* warp_row0 = B.CreateMul(warp, e.c32(R));  // the warp's first row within the CTA tile

  e.loop(zero, kv_end, BN, "kv", [&](Value* n0) {
    tile::sync_threads(e);  // the previous tile is no longer being read
    tile::copy_tile_to_shared(e, {k_base, strides[1][1], n0, seq_kv, k_smem, BN, d_qk, plan.threads, plan.smem.k_stride}, tid);
    tile::copy_tile_to_shared(e, {v_base, strides[2][1], n0, seq_kv, v_smem, BN, d_v, plan.threads, d_v}, tid);
    tile::sync_threads(e);

    // S = Q Kᵀ for this lane's keys, one element pair of the head dim per iteration.
    for (auto& row : s)
      for (auto& slot : row) B.CreateStore(e.cf(0.f), slot);
    e.loop(zero, e.c32(d_qk / 2), 1, "dot", [&](Value* c) {
      std::vector<std::pair<Value*, Value*>> kp(KPL);
      for (int k = 0; k < KPL; ++k) {
        Value* key = B.CreateAdd(lane, e.c32(32 * k));
        Value* off = B.CreateAdd(B.CreateMul(key, e.c32(plan.smem.k_stride / 2)), c);
        kp[k] = tile::unpack_pair(e, B.CreateAlignedLoad(e.i32(), B.CreateGEP(e.i32(), k_smem, off), llvm::Align(4)), dt);
      }
      for (int r = 0; r < R; ++r) {
        Value* qrow = B.CreateAdd(warp_row0, e.c32(r));
        Value* qoff = B.CreateAdd(B.CreateMul(qrow, e.c32(d_qk)), B.CreateMul(c, e.c32(2)));
        Value* qptr = B.CreateGEP(e.f32(), q_smem, qoff);
        Value* qx = B.CreateAlignedLoad(e.f32(), qptr, llvm::Align(8));
        Value* qy = B.CreateAlignedLoad(e.f32(), B.CreateGEP(e.f32(), qptr, e.c32(1)), llvm::Align(4));
        for (int k = 0; k < KPL; ++k) {
          Value* acc = B.CreateLoad(e.f32(), s[r][k]);
          acc = B.CreateIntrinsic(llvm::Intrinsic::fma, {e.f32()}, {qx, kp[k].first, acc});
          acc = B.CreateIntrinsic(llvm::Intrinsic::fma, {e.f32()}, {qy, kp[k].second, acc});
          B.CreateStore(acc, s[r][k]);
        }
      }
    });

    // Online softmax per row; P to shared memory for the PV product.
    for (int r = 0; r < R; ++r) {
      Row& row = rows[r];
      std::vector<Value*> sv(KPL);
      Value* local_max = e.neg_inf();
      for (int k = 0; k < KPL; ++k) {
        Value* kv = B.CreateAdd(n0, B.CreateAdd(lane, e.c32(32 * k)));
        Value* visible = B.CreateICmpSLT(kv, seq_kv);
        if (plan.causal) visible = B.CreateAnd(visible, B.CreateICmpSLE(kv, row.q_index));
        sv[k] = B.CreateSelect(visible, B.CreateLoad(e.f32(), s[r][k]), e.neg_inf());
        local_max = B.CreateMaxNum(local_max, sv[k]);
      }
      Value* m_old = B.CreateLoad(e.f32(), row.m);
      Value* m_new = B.CreateMaxNum(m_old, tile::warp_max(e, local_max));
      Value* m_use = B.CreateSelect(B.CreateFCmpOEQ(m_new, e.neg_inf()), e.cf(0.f), m_new);
      Value* alpha = tile::exp2_fast(e, B.CreateFSub(m_old, m_use));
      Value* local_sum = e.cf(0.f);
      for (int k = 0; k < KPL; ++k) {
        Value* p = tile::exp2_fast(e, B.CreateFSub(sv[k], m_use));
        local_sum = B.CreateFAdd(local_sum, p);
        Value* at = B.CreateAdd(e.c32(r * BN + 32 * k), lane);
        B.CreateAlignedStore(p, B.CreateGEP(e.f32(), p_smem, at), llvm::Align(4));
      }
      B.CreateStore(m_new, row.m);
      B.CreateStore(B.CreateFAdd(B.CreateFMul(B.CreateLoad(e.f32(), row.l), alpha), tile::warp_sum(e, local_sum)), row.l);
      for (auto* slot : row.acc) B.CreateStore(B.CreateFMul(B.CreateLoad(e.f32(), slot), alpha), slot);
    }
    tile::sync_warp(e);  // P written by every lane is visible to every lane

    // O += P V: lane owns output pairs lane + 32i; V rows are read contiguously across the warp.
    e.loop(zero, e.c32(BN), 1, "pv", [&](Value* j) {
      std::vector<std::pair<Value*, Value*>> vp(plan.pairs_v);
      std::vector<Value*> in_range(plan.pairs_v);
      for (int i = 0; i < plan.pairs_v; ++i) {
        Value* pidx = B.CreateAdd(lane, e.c32(32 * i));
        in_range[i] = B.CreateICmpSLT(pidx, e.c32(d_v / 2));
        Value* safe = B.CreateSelect(in_range[i], pidx, zero);
        Value* off = B.CreateAdd(B.CreateMul(j, e.c32(d_v / 2)), safe);
        vp[i] = tile::unpack_pair(e, B.CreateAlignedLoad(e.i32(), B.CreateGEP(e.i32(), v_smem, off), llvm::Align(4)), dt);
      }
      for (int r = 0; r < R; ++r) {
        Value* p = B.CreateAlignedLoad(e.f32(), B.CreateGEP(e.f32(), p_smem, B.CreateAdd(e.c32(r * BN), j)), llvm::Align(4));
        for (int i = 0; i < plan.pairs_v; ++i)
          for (int h = 0; h < 2; ++h) {
            Value* v = h ? vp[i].second : vp[i].first;
            llvm::AllocaInst* slot = rows[r].acc[2 * i + h];
            B.CreateStore(B.CreateIntrinsic(llvm::Intrinsic::fma, {e.f32()}, {p, v, B.CreateLoad(e.f32(), slot)}), slot);
          }
      }
    });
  });

  // Epilogue: O = acc / l, LSE = ln(Σ e^{s·scale}) = (m + log2 l)·ln 2; masked rows → 0 and −inf.
  Value* lse_ptr = arg(kParamLse);
  for (int r = 0; r < R; ++r) {
    Row& row = rows[r];
    e.when(row.valid, "store", [&] {
      Value* l = B.CreateLoad(e.f32(), row.l);
      Value* m = B.CreateLoad(e.f32(), row.m);
      Value* any = B.CreateFCmpOGT(l, e.cf(0.f));
      Value* inv = B.CreateSelect(any, B.CreateFDiv(e.cf(1.f), l), e.cf(0.f));
      Value* row_ptr =
          B.CreateGEP(B.getInt16Ty(), o_base, B.CreateMul(B.CreateSExt(row.q_index, e.i64()), strides[3][1]));
      for (int i = 0; i < plan.pairs_v; ++i) {
        Value* p = B.CreateAdd(lane, e.c32(32 * i));
        auto store = [&, i, p] {
          Value* x = B.CreateFMul(B.CreateLoad(e.f32(), row.acc[2 * i]), inv);
          Value* y = B.CreateFMul(B.CreateLoad(e.f32(), row.acc[2 * i + 1]), inv);
          B.CreateAlignedStore(tile::pack_pair(e, x, y, dt), B.CreateGEP(B.getInt32Ty(), row_ptr, p), llvm::Align(4));
        };
        if (32 * (i + 1) <= d_v / 2) store();
        else e.when(B.CreateICmpSLT(p, e.c32(d_v / 2)), "store.pair", store);
      }
      Value* has_lse = B.CreateICmpNE(lse_ptr, llvm::ConstantPointerNull::get(llvm::PointerType::get(e.ctx, 1)));
      e.when(B.CreateAnd(has_lse, B.CreateICmpEQ(lane, zero)), "store.lse", [&] {
        Value* lse = B.CreateFMul(B.CreateFAdd(m, tile::log2_fast(e, l)), e.cf(static_cast<float>(M_LN2)));
        lse = B.CreateSelect(any, lse, e.neg_inf());
        // LSE is [batch, heads_q, seq_q]: index ((b·H + h)·S + q) with H = gridDim.y.
        Value* heads = B.CreateCall(llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y));
        Value* idx = B.CreateAdd(B.CreateMul(B.CreateZExt(batch, e.i64()), B.CreateZExt(heads, e.i64())),
                                 B.CreateZExt(head, e.i64()));
        idx = B.CreateAdd(B.CreateMul(idx, B.CreateSExt(seq_q, e.i64())), B.CreateSExt(row.q_index, e.i64()));
        B.CreateStore(lse, B.CreateGEP(e.f32(), lse_ptr, idx));
      });
    });
  }
  B.CreateRetVoid();
  return fn;
}

}  // namespace flashjit

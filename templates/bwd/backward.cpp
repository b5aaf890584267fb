// FlashAttention-2's backward (Dao 2023, Algorithm 2) as kernels over the tile pieces of
// compiler/tile, one per side of the attention matrix:
//   dK/dV: a CTA holds a tile of keys (K, V) and walks the query tiles that see it (the mask's
//          transposed ranges, AnalyzedSpec::q_range, or the block map), accumulating dV += Pᵀ dO
//          and dK += dSᵀ Q in registers over its KV head's query heads in a fixed order; with
//          BackwardPlan::fused_dq it also adds dQ += dS K into a workspace (templates/bwd/dq_sum);
//   dQ:    a CTA holds a tile of queries (Q, dO) and walks their key tiles (AnalyzedSpec::kv_range),
//          accumulating dQ += dS K: the deterministic way, each element summed by one thread.
// Both recompute S = QKᵀ, P = exp(S − LSE) from the forward's LSE and dP = dO Vᵀ, then
// dS = P ∘ (dP − D) chained through the score modifier's derivative; scale multiplies dQ and dK
// once, at the end. Rows whose keys are all masked have LSE = −inf: P = 0 there, so their
// gradients are exactly 0. Above d = 128 the dK/dV kernel runs twice, once per output, or (with
// BackwardPlan::warpgroup_split) gives each output to one of its warpgroups.
#include "templates/bwd/backward.hpp"

#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>

#include <cmath>
#include <functional>

#include "compiler/lower_expr.hpp"
#include "compiler/tile/copy.hpp"
#include "compiler/tile/gpu.hpp"
#include "compiler/tile/mma.hpp"
#include "templates/bwd/backward_kernel.hpp"
#include "templates/common/backward_abi.hpp"
#include "templates/common/forward_abi.hpp"

namespace flashjit::bwd {

BackwardKernel::BackwardKernel(llvm::Module& module, const BackwardPlan& plan, Side side, Outputs out,
                               const std::string& name)
    : plan_(plan),
      P_(side == Side::keys ? plan.kv : plan.q),
      spec_(plan.attention()),
      side_(side),
      out_(out),
      fn_(declare_kernel(module, *plan.spec, {P_.threads, P_.min_ctas_per_sm}, KernelTail::backward, name)),
      e_(module, fn_),
      NT(P_.cols / 8),
      PRODUCER(side == Side::keys && P_.producer) {
  auto& B = e_.b;
  B.SetInsertPoint(llvm::BasicBlock::Create(e_.ctx, "entry", fn_));
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 3; ++i) {
      strides_[t][i] = arg(kParamStrides + 3 * t + i);
      strides_[4 + t][i] = bwd(kBwdStrides + 3 * t + i);
    }
  seq_q_ = arg(kParamSeqQ);
  seq_kv_ = arg(kParamSeqKv);
  seq_rows_ = side == Side::keys ? seq_kv_ : seq_q_;
  seq_cols_ = side == Side::keys ? seq_q_ : seq_kv_;
  scale_log2_ = arg(kParamScaleLog2);
  group_ = arg(kParamGroup);
  tid_ = tile::thread_id(e_);
  warp_ = B.CreateLShr(tid_, 5);
  lane_ = B.CreateAnd(tid_, e_.c32(31));
  g_ = B.CreateLShr(lane_, 2);
  t4_ = B.CreateAnd(lane_, e_.c32(3));
  tile_ = tile::block_id(e_, 0);
  batch_ = tile::block_id(e_, 2);
  Value* grid_y =
      B.CreateCall(llvm::Intrinsic::getDeclaration(&module, llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y));
  if (side == Side::keys) {
    head_kv_ = tile::block_id(e_, 1);
    heads_q_ = B.CreateMul(grid_y, group_);
    head_ = B.CreateMul(head_kv_, group_);
  } else {
    head_ = tile::block_id(e_, 1);
    heads_q_ = grid_y;
    head_kv_ = B.CreateUDiv(head_, group_);
  }
  smem_ = tile::shared_u32(e_, tile::shared_base(e_));
  if (P_.smem_align > 1) smem_ = B.CreateAnd(B.CreateAdd(smem_, e_.c32(P_.smem_align - 1)), e_.c32(-P_.smem_align));
  const TileRows rows = tile_rows(e_, tile_, P_.rows, seq_rows_);
  row0_ = rows.first;
  row_last_ = rows.last;
}

Value* BackwardKernel::row_of(int mt, int i) {
  auto& B = e_.b;
  Value* r = B.CreateAdd(row0_, B.CreateAdd(tc_a_->warp_row0(), B.CreateAdd(e_.c32(16 * mt), g_)));
  return B.CreateAdd(r, e_.c32(8 * (i >> 1)));
}

Value* BackwardKernel::col_of(Value* first, int nt, int i) {
  auto& B = e_.b;
  return B.CreateAdd(first, B.CreateAdd(e_.c32(nt * 8 + (i & 1)), B.CreateShl(t4_, 1)));
}

// Streamed tile j of the walk into stage j % stages: Q and dO rows (keys side) or K and V rows.
void BackwardKernel::issue(Value* j, Value* entry, bool once) {
  auto& B = e_.b;
  Value* stage = B.CreateURem(pipe_step(j), e_.c32(P_.stages));
  Value* first = B.CreateMul(walk_->tile(e_, j, entry), e_.c32(P_.cols));
  const int t_qk = side_ == Side::keys ? 0 : 1, t_v = side_ == Side::keys ? 4 : 2;
  // With a producer warpgroup only it copies: its 128 threads share the rows.
  const int threads = PRODUCER ? 128 : P_.threads;
  Value* tid = PRODUCER ? B.CreateSub(tid_, e_.c32(P_.compute_threads)) : tid_;
  tile::copy_rows(e_, stage_tile(P_.str_qk, P_.str_qk_stage, stage),
                  {str_qk_base_, strides_[t_qk][1], first, seq_cols_}, spec_.head_dim_qk, threads, tid, once);
  tile::copy_rows(e_, stage_tile(P_.str_v, P_.str_v_stage, stage), {str_v_base_, strides_[t_v][1], first, seq_cols_},
                  spec_.head_dim_v, threads, tid, once);
  if (side_ != Side::keys) return;
  // The streamed queries' LSE and D, in the same commit group as their Q and dO rows.
  Value* stats = B.CreateAdd(B.CreateAdd(smem_, e_.c32(P_.stats)), B.CreateMul(stage, e_.c32(P_.stats_stage)));
  for (int c0 = 0; c0 < P_.cols; c0 += threads)
    e_.when(B.CreateICmpULT(B.CreateAdd(tid, e_.c32(c0)), e_.c32(P_.cols)), "stats", [&] {
      Value* c = B.CreateAdd(tid, e_.c32(c0));
      Value* q = B.CreateAdd(first, c);
      Value* valid = B.CreateICmpSLT(q, seq_q_);
      Value* safe = B.CreateSelect(valid, q, e_.c32(0));
      Value* dst = B.CreateAdd(stats, B.CreateShl(c, 2));
      tile::cp_async_4(e_, dst, B.CreateGEP(e_.f32(), lse_row_, safe), valid);
      tile::cp_async_4(e_, B.CreateAdd(dst, e_.c32(4 * P_.cols)), B.CreateGEP(e_.f32(), delta_row_, safe), valid);
    });
}

// LSE·log2 e (+inf for a row with no visible key, so that P = 0 there) or D of the query of
// element (mt, nt, i): the dK/dV kernel reads the stage's copy in shared memory (short live
// ranges: each is loaded where it is used), the dQ kernel its rows' registers.
Value* BackwardKernel::row_stat(bool delta, int mt, int nt, int i) {
  auto& B = e_.b;
  if (side_ != Side::keys)
    return B.CreateLoad(e_.f32(), (delta ? delta_vars_ : lse_vars_)[size_t(2 * mt + (i >> 1))]);
  Value* col = B.CreateAdd(B.CreateShl(t4_, 1), e_.c32(8 * nt + (i & 1)));
  Value* addr = B.CreateAdd(stats_, B.CreateShl(col, 2));
  if (delta) addr = B.CreateAdd(addr, e_.c32(4 * P_.cols));
  Value* x = B.CreateAlignedLoad(e_.f32(), B.CreateIntToPtr(addr, llvm::PointerType::get(e_.ctx, 3)), llvm::Align(4));
  if (delta) return x;
  Value* inf = llvm::ConstantFP::getInfinity(e_.f32());
  return B.CreateSelect(B.CreateFCmpOEQ(x, e_.neg_inf()), inf, B.CreateFMul(x, e_.cf(static_cast<float>(M_LOG2E))));
}

// Pointers of query head `head`, and the streamed tiles its rows see.
void BackwardKernel::start_head(Value* head) {
  auto& B = e_.b;
  auto base = [&](Value* ptr, int t, Value* h) {
    return B.CreateGEP(B.getInt16Ty(), ptr, slice_offset(e_, strides_[t], batch_, h));
  };
  Value* stats = B.CreateMul(B.CreateAdd(B.CreateMul(B.CreateZExt(batch_, e_.i64()), B.CreateZExt(heads_q_, e_.i64())),
                                         B.CreateZExt(head, e_.i64())),
                             B.CreateSExt(seq_q_, e_.i64()));
  lse_row_ = B.CreateGEP(e_.f32(), arg(kParamLse), stats);
  batch_head_ = B.CreateAdd(B.CreateMul(batch_, heads_q_), head);
  delta_row_ = B.CreateGEP(e_.f32(), bwd(kBwdDelta), stats);
  if (side_ == Side::keys) {
    str_qk_base_ = base(arg(kParamQ), 0, head);
    str_v_base_ = base(bwd(kBwdDo), 4, head);
  } else {
    str_qk_base_ = base(arg(kParamK), 1, head_kv_);
    str_v_base_ = base(arg(kParamV), 2, head_kv_);
  }
  ex_ = expr_inputs(e_, *plan_.spec, batch_, head, head_kv_, heads_q_);
  // Keys side: the transposed range, whose forms read the key position where the forward's read
  // the query, and the two lengths exchanged (compiler/dsl/kv_range.hpp, derive_q_range).
  KvBoundsInputs in = kv_bounds_inputs(e_, ex_, row0_, row_last_);
  const dsl::KvRange* range = nullptr;
  if (plan_.spec->mask) range = side_ == Side::keys ? &plan_.spec->q_range : &plan_.spec->kv_range;
  if (side_ == Side::keys) std::swap(in.seq_q, in.seq_kv);
  bounds_ = emit_kv_bounds(e_, range, in);
  const TileSpan span = covering_tiles(e_, bounds_, P_.cols);
  Value* count = B.CreateBinaryIntrinsic(llvm::Intrinsic::smax, B.CreateSub(span.end, span.first), e_.c32(0));
  Value* list = nullptr;
  if (plan_.spec->block_map.needed) {  // the tile lists the map kernel wrote for this row tile
    BlockMapRow row = backward_map_row(e_, plan_, side_ == Side::keys, ex_, tile_);
    count = B.CreateAlignedLoad(e_.i32(), row.count, llvm::Align(4));
    list = row.tiles;
  }
  walk_ = std::make_unique<TileWalk>(e_, span.first, count, list, P_.stages);
}

// The dQ kernel's rows: LSE·log2 e (+inf where no key is visible) and D, once.
void BackwardKernel::load_row_stats() {
  auto& B = e_.b;
  Value* last_q = B.CreateSub(seq_q_, e_.c32(1));
  for (int mt = 0; mt < P_.m_tiles; ++mt)
    for (int r = 0; r < 2; ++r) {
      const size_t idx = size_t(2 * mt + r);
      Value* q = clamp(row_of(mt, 2 * r), last_q);  // rows past seq_q are never stored
      Value* lse = B.CreateAlignedLoad(e_.f32(), B.CreateGEP(e_.f32(), lse_row_, q), llvm::Align(4));
      Value* inf = llvm::ConstantFP::getInfinity(e_.f32());
      B.CreateStore(B.CreateSelect(B.CreateFCmpOEQ(lse, e_.neg_inf()), inf,
                                   B.CreateFMul(lse, e_.cf(static_cast<float>(M_LOG2E)))),
                    lse_vars_[idx]);
      B.CreateStore(B.CreateAlignedLoad(e_.f32(), B.CreateGEP(e_.f32(), delta_row_, q), llvm::Align(4)),
                    delta_vars_[idx]);
    }
}

// P = exp(score'(scale·S) − LSE), with the mask where the tile is not wholly visible; `grad` gets
// d score'/d score at each element when the spec has a score modifier.
RegTile BackwardKernel::probabilities(RegTile s, Value* first, Value* entry, RegTile* grad) {
  auto& B = e_.b;
  Value* last_q = B.CreateSub(seq_q_, e_.c32(1));
  Value* last_kv = B.CreateSub(seq_kv_, e_.c32(1));
  Value* scale = B.CreateFMul(scale_log2_, e_.cf(static_cast<float>(M_LN2)));
  for (int mt = 0; mt < P_.m_tiles; ++mt)
    for (int nt = 0; nt < NT; ++nt)
      for (int i = 0; i < 4; ++i) {
        Value*& x = s[mt][nt][i];
        if (plan_.spec->score) {
          ExprInputs at = ex_;
          at.q = clamp(query_of(first, mt, nt, i), last_q);
          at.kv = clamp(key_of(first, mt, nt, i), last_kv);
          at.score = B.CreateFMul(x, scale);
          (*grad)[mt][nt][i] = plan_.spec->score_grad ? lower_expr(e_, *plan_.spec->score_grad, at) : e_.cf(1.f);
          x = B.CreateFMul(lower_expr(e_, *plan_.spec->score, at), e_.cf(static_cast<float>(M_LOG2E)));
        } else {
          x = B.CreateFMul(x, scale_log2_);
        }
        x = B.CreateFSub(x, row_stat(false, mt, nt, i));
      }
  p_vars_.store(e_, s);
  Value* full = walk_->has_list() ? walk_->listed_full(e_, entry) : tile_in_full_range(e_, bounds_, first, P_.cols);
  e_.when(B.CreateNot(full), "mask", [&] {
    for (int mt = 0; mt < P_.m_tiles; ++mt)
      for (int nt = 0; nt < NT; ++nt)
        for (int i = 0; i < 4; ++i) {
          Value* q = query_of(first, mt, nt, i);
          Value* kv = key_of(first, mt, nt, i);
          Value* visible = B.CreateAnd(B.CreateICmpSLT(q, seq_q_), B.CreateICmpSLT(kv, seq_kv_));
          if (plan_.spec->mask) {
            ExprInputs at = ex_;
            at.q = clamp(q, last_q);
            at.kv = clamp(kv, last_kv);
            visible = B.CreateAnd(visible, lower_expr(e_, *plan_.spec->mask, at));
          }
          llvm::AllocaInst* var = p_vars_.vars[mt][nt][i];
          B.CreateStore(B.CreateSelect(visible, B.CreateLoad(e_.f32(), var), e_.neg_inf()), var);
        }
  });
  RegTile p = p_vars_.load(e_);
  for (auto& row : p)
    for (auto& t : row)
      for (Value*& x : t) x = tile::exp2_fast(e_, x);
  return p;
}

void BackwardKernel::tile_step(Value* j, Value* entry) {
  auto& B = e_.b;
  Value* stage = B.CreateURem(pipe_step(j), e_.c32(P_.stages));
  const SmemTile str_qk = stage_tile(P_.str_qk, P_.str_qk_stage, stage);
  const SmemTile str_v = stage_tile(P_.str_v, P_.str_v_stage, stage);
  Value* first = B.CreateMul(walk_->tile(e_, j, entry), e_.c32(P_.cols));
  if (side_ == Side::keys)
    stats_ = B.CreateAdd(B.CreateAdd(smem_, e_.c32(P_.stats)), B.CreateMul(stage, e_.c32(P_.stats_stage)));
  if (P_.roles > 1) {
    if (P_.p_buffers() > 1)
      p_buffer_ = B.CreateMul(B.CreateAnd(pipe_step(j), e_.c32(1)), e_.c32(P_.rows * P_.cols * 4));
    return out_.dv ? step_dv(first, entry, str_qk, str_v) : step_dk(str_qk, str_v);
  }
  RegTile grad;
  if (plan_.spec->score) grad = tile::zero_tile(e_, P_.m_tiles, NT);
  const bool early = P_.dp_early && (out_.dk || out_.dq);  // a launch for dV alone has no dP
  RegTile s = early ? tc_a_->mma_abt_async(e_, str_qk) : tc_a_->mma_abt(e_, str_qk);  // S = QKᵀ (or K Qᵀ)
  RegTile dp = early ? tc_b_->mma_abt_async(e_, str_v) : RegTile{};                  // dP = dO Vᵀ (or V dOᵀ)
  if (early) tc_a_->wait(e_, s, /*pending=*/1);
  RegTile p = probabilities(s, first, entry, &grad);
  if (out_.dv) {  // dV += Pᵀ dO
    RegTile acc = acc_a_.load(e_);
    tc_a_->mma_pv(e_, acc, p, str_v);
    acc_a_.store(e_, acc);
  }
  if (!out_.dk && !out_.dq) return;
  // The dK/dV kernel keeps P rounded to the dtype across the dP product (the pairs the dV product
  // packed): half the registers of fp32 P, where its 128 dK/dV accumulators leave none to spare.
  // That is the P a plain same-dtype implementation differentiates (softmax's output in bf16/fp16).
  if (side_ == Side::keys) tile::round_tile(e_, p, spec_.dtype);
  if (early)
    tc_b_->wait(e_, dp, 0);
  else
    dp = tc_b_->mma_abt(e_, str_v);
  const bool keys = side_ == Side::keys;
  for (int mt = 0; mt < P_.m_tiles; ++mt)
    for (int nt = 0; nt < NT; ++nt)
      for (int i = 0; i < 4; ++i) {
        Value* d = row_stat(true, mt, nt, i);
        Value* ds = B.CreateFMul(p[mt][nt][i], B.CreateFSub(dp[mt][nt][i], d));
        if (plan_.spec->score) ds = B.CreateFMul(ds, grad[mt][nt][i]);
        dp[mt][nt][i] = ds;
      }
  if (keys) {  // dK += dSᵀ Q
    if (out_.dq) {
      // dSᵀ is rewritten once both warpgroups' dQ products of the last step have read it: the CTA
      // barrier that ends each step orders that without a producer. With one, steps alternate
      // between two buffers where they fit: a warpgroup writes step j + 2's dSᵀ after the barrier
      // in step j + 1's add_dq, which the other passes only once its step-j product is waited for.
      // Else this barrier.
      if (P_.ds_buffers > 1)
        ds_buffer_ = B.CreateAnd(pipe_step(j), e_.c32(1));
      else if (PRODUCER)
        sync_compute(e_, P_);
      store_ds(e_, P_, spec_.dtype, dq_sum(), dp);
    }
    RegTile acc = acc_b_.load(e_);
    tc_b_->mma_pv(e_, acc, dp, str_qk);
    acc_b_.store(e_, acc);
    if (out_.dq) add_dq(e_, P_, spec_.dtype, spec_.head_dim_qk, dq_sum(), first);
  } else {  // dQ += dS K
    RegTile acc = acc_a_.load(e_);
    tc_a_->mma_pv(e_, acc, dp, str_qk);
    acc_a_.store(e_, acc);
  }
}

void BackwardKernel::walk_tiles() {
  if (PRODUCER) return consume();
  auto& B = e_.b;
  const int S = P_.stages;
  for (int s = 0; s + 1 < S; ++s) {
    e_.when(B.CreateICmpSLT(e_.c32(s), walk_->count()), "prologue",
            [&] { issue(e_.c32(s), walk_->entry(e_, e_.c32(0), s), /*once=*/true); });
    tile::cp_async_commit(e_);
  }
  e_.loop(e_.c32(0), walk_->count(), 1, "tiles", [&](Value* j) {
    TileWalk::Step step = walk_->begin_step(e_, j);
    e_.when(B.CreateICmpSLT(B.CreateAdd(j, e_.c32(S - 1)), walk_->count()), "issue", [&] {
      issue(B.CreateAdd(j, e_.c32(S - 1)), walk_->entry(e_, j, S - 1, step.last), /*once=*/false);
    });
    tile::cp_async_commit(e_);  // possibly empty: keeps "S − 1 groups pending" true at every wait
    tile::cp_async_wait(e_, S - 1);
    tc_a_->publish_shared(e_);
    tile::sync_threads(e_);
    tile_step(j, walk_->entry(e_, j, 0, step.now));
    tile::sync_threads(e_);  // this stage is refilled by a later iteration's cp.async
  });
  tile::cp_async_wait(e_, 0);
}

// Rows of `acc` (× mult) below `limit` into a [batch, seq, head] tensor of the dtype.
void BackwardKernel::store(const tile::TileVars& acc, Value* base, Value* const strides[3], Value* limit, int cols,
                           Value* mult) {
  auto& B = e_.b;
  const int OT = (cols + 7) / 8;
  for (int mt = 0; mt < P_.m_tiles; ++mt)
    for (int r = 0; r < 2; ++r) {
      Value* row = row_of(mt, 2 * r);
      e_.when(B.CreateICmpSLT(row, limit), "store", [&] {
        Value* row_ptr = B.CreateGEP(B.getInt16Ty(), base, B.CreateMul(B.CreateSExt(row, e_.i64()), strides[1]));
        tile::store_row_pairs(e_, acc, size_t(mt), r, OT, mult, t4_, row_ptr, spec_.dtype);
      });
    }
}

void BackwardKernel::for_each_head(Value* first_head, const std::function<void()>& walk) {
  auto& B = e_.b;
  e_.loop(e_.c32(0), group_, 1, "head", [&](Value* g) {
    start_head(B.CreateAdd(first_head, g));
    if (steps_) step0_ = B.CreateLoad(e_.i32(), steps_);
    walk();
    if (steps_) B.CreateStore(B.CreateAdd(step0_, walk_->count()), steps_);
  });
}

void BackwardKernel::run() {
  auto& B = e_.b;
  const bool keys = side_ == Side::keys;
  const int d_qk = spec_.head_dim_qk, d_v = spec_.head_dim_v;
  // Resident tiles: K and V of this key tile, or Q and dO of this query tile.
  const SmemTile res_qk{B.CreateAdd(smem_, e_.c32(P_.res_qk)), P_.rows};
  const SmemTile res_v{B.CreateAdd(smem_, e_.c32(P_.res_v)), P_.rows};
  auto base = [&](Value* ptr, int t, Value* h) {
    return B.CreateGEP(B.getInt16Ty(), ptr, slice_offset(e_, strides_[t], batch_, h));
  };
  Value* res_qk_src = keys ? base(arg(kParamK), 1, head_kv_) : base(arg(kParamQ), 0, head_);
  Value* res_v_src = keys ? base(arg(kParamV), 2, head_kv_) : base(bwd(kBwdDo), 4, head_);
  auto load_resident = [&] {
    tile::copy_rows(e_, res_qk, {res_qk_src, strides_[keys ? 1 : 0][1], row0_, seq_rows_}, d_qk, P_.compute_threads,
                    tid_, true);
    tile::copy_rows(e_, res_v, {res_v_src, strides_[keys ? 2 : 4][1], row0_, seq_rows_}, d_v, P_.compute_threads, tid_,
                    true);
    tile::cp_async_commit(e_);
  };
  if (PRODUCER) {
    e_.when(B.CreateICmpULT(tid_, e_.c32(P_.compute_threads)), "resident", load_resident);
    start_producer(head_);  // returns in the compute warpgroups
  } else {
    load_resident();
  }

  const int MT = P_.m_tiles;
  // tc_a: A = the d_qk tile (S = A·Bᵀ over d_qk); its P·B product is dV (keys) or dQ (queries).
  // tc_b: A = the d_v tile (dP over d_v); its product is dK (keys side only).
  // With two roles each warpgroup multiplies all the CTA's rows: its warps count from 0.
  const int out_a = keys ? d_v : d_qk;
  Value* mma_warp = P_.roles > 1 ? B.CreateAnd(warp_, e_.c32(3)) : warp_;
  tc_a_ = tile::make_tensor_core(P_.wgmma, {spec_.dtype, P_.rows, P_.cols, plan_.k_steps_qk, (out_a + 7) / 8, MT, false},
                                 mma_warp, lane_);
  tc_b_ = tile::make_tensor_core(P_.wgmma, {spec_.dtype, P_.rows, P_.cols, plan_.k_steps_v, (d_qk + 7) / 8, MT, false},
                                 mma_warp, lane_);
  tc_a_->prepare(e_, res_qk);
  tc_b_->prepare(e_, res_v);

  auto vars = [&](tile::TileVars& t, int cols, const char* name, bool zero) {
    t.vars.assign(MT, std::vector<std::array<llvm::AllocaInst*, 4>>(cols));
    for (auto& row : t.vars)
      for (auto& a : row)
        for (auto& x : a) x = e_.var(e_.f32(), name, zero ? e_.cf(0.f) : nullptr);
  };
  vars(acc_a_, (out_a + 7) / 8, "acc_a", true);
  if (keys && out_.dk) vars(acc_b_, (d_qk + 7) / 8, "acc_b", true);
  vars(p_vars_, NT, "p", false);
  for (int i = 0; !keys && i < 2 * MT; ++i) {
    lse_vars_.push_back(e_.var(e_.f32(), "lse"));
    delta_vars_.push_back(e_.var(e_.f32(), "delta"));
  }

  auto scale = [&] { return B.CreateFMul(scale_log2_, e_.cf(static_cast<float>(M_LN2))); };
  auto walk_and_store = [&] {
    // Every query head of this KV head's group, in order: dK and dV sum over them on chip.
    for_each_head(head_, [&] { walk_tiles(); });
    // The shared memory a bulk reduction reads must outlive it: wait before the CTA exits.
    if (out_.dq) finish_dq(e_, dq_sum());
    Value* dk_scale = scale();
    if (out_.dv) store(acc_a_, base(bwd(kBwdDv), 7, head_kv_), strides_[7], seq_kv_, d_v, e_.cf(1.f));
    if (out_.dk) store(acc_b_, base(bwd(kBwdDk), 6, head_kv_), strides_[6], seq_kv_, d_qk, dk_scale);
  };
  if (keys && P_.roles > 1) {
    run_roles(walk_and_store);
  } else if (keys) {
    walk_and_store();
  } else {
    start_head(head_);
    load_row_stats();
    walk_tiles();
    Value* dq_scale = scale();
    store(acc_a_, base(bwd(kBwdDq), 5, head_), strides_[5], seq_q_, d_qk, dq_scale);
  }
  B.CreateRetVoid();
}

}  // namespace flashjit::bwd

namespace flashjit {

using bwd::BackwardKernel;
using bwd::Side;

void emit_attention_backward(llvm::Module& module, const BackwardPlan& plan, const std::string& entry) {
  const BackwardEntries names = backward_entries(plan, entry);
  const bool dv = !plan.split_kv;  // with dK, or in a launch of its own
  BackwardKernel(module, plan, Side::keys, {.dk = true, .dv = dv, .dq = plan.fused_dq}, names.dkdv).run();
  if (plan.fused_dq) {
    BackwardKernel(module, plan, Side::keys, {.dk = true, .dv = true}, names.dkdv_det).run();
    emit_backward_dq_convert(module, plan, names.dq_convert);
  }
  if (plan.split_kv) BackwardKernel(module, plan, Side::keys, {.dv = true}, names.dv).run();
  BackwardKernel(module, plan, Side::queries, {.dq = true}, names.dq).run();
  emit_backward_prep(module, plan, names.prep);
  if (plan.spec->block_map.needed) {
    emit_backward_map(module, plan, /*keys=*/false, names.map_q);
    emit_backward_map(module, plan, /*keys=*/true, names.map_kv);
  }
}

}  // namespace flashjit

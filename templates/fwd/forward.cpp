// FlashAttention-2's forward (Dao 2023, Algorithm 1) as LLVM IR, over the tile pieces of
// compiler/tile. A CTA owns block_m query rows; each warp's rows stay in its own registers, so the
// softmax statistics need quad shuffles only. Key/value tiles of block_n keys stream through a
// num_stages-deep pipeline in swizzled shared memory: cp.async from the whole CTA, or TMA loads
// from its first thread with the stages handed over by mbarriers (ForwardPlan::tma,
// forward_tma.cpp), or a producer warpgroup's copies, handed over the same way. S = QKᵀ
// and O += PV run on the tensor cores (wgmma or mma.sync, compiler/tile/tensor_core.hpp); P goes
// from the S accumulators straight into A fragments, never through memory. The online softmax works
// in the exp2 domain with the scale folded into one FFMA per score; rows whose keys are all masked
// end with O = 0 and LSE = −inf. The mask decides the key tiles: its closed-form kv range
// (templates/common/kv_bounds) gives, per query tile, the tiles to visit — the rest are never
// loaded — and those needing no mask code; masks it cannot describe exactly read the block map's
// list instead. In the other tiles the mask runs per element: as two bounds per row where it is
// one key interval per row, else as its expression. A score modifier runs on scale·qkᵀ before the
// softmax. The producer warpgroup and the persistent walk over query tiles are in
// forward_producer.cpp, the score modifier and the mask in forward_scores.cpp, the epilogue in
// forward_store.cpp.
#include "templates/fwd/forward.hpp"

#include <cmath>

#include "compiler/lower_expr.hpp"
#include "compiler/tile/copy.hpp"
#include "compiler/tile/gpu.hpp"
#include "compiler/tile/mbarrier.hpp"
#include "compiler/tile/mma.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/fwd/forward_kernel.hpp"
#include "templates/fwd/sequence.hpp"
#include "templates/fwd/tile_order.hpp"

namespace flashjit {

namespace fwd {

ForwardKernel::ForwardKernel(llvm::Module& module, const ForwardPlan& plan, const std::string& entry)
    : plan_(plan),
      spec_(plan.attention()),
      fn_(declare_kernel(module, *plan.spec, {plan.threads, plan.min_ctas_per_sm},
                         plan.has_map() ? KernelTail::block_map : KernelTail::none, entry, plan.tensor_maps())),
      e_(module, fn_),
      BM(plan.config.block_m),
      BN(plan.config.block_n),
      S(plan.config.num_stages),
      NT(BN / 8),
      OT((spec_.head_dim_v + 7) / 8),
      G(plan.target.pack_gqa),
      SPLIT(plan.target.split_kv),
      VARLEN(plan.target.varlen),
      PAGED(plan.target.paged),
      PRODUCER(plan.producer),
      PERSISTENT(plan.persistent),
      Q_AHEAD(plan.persistent && (plan.q_buffers > 1 || plan.stage_in_v)),
      ROTATED(plan.rotated),
      KV_BARS(plan.kv_bars),
      TMA(plan.tma) {
  auto& B = e_.b;
  B.SetInsertPoint(llvm::BasicBlock::Create(e_.ctx, "entry", fn_));
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 3; ++i) strides_[t][i] = arg(kParamStrides + 3 * t + i);
  scale_log2_ = arg(kParamScaleLog2);

  if (plan.dependent_launch) tile::launch_dependents(e_);
  tid_ = tile::thread_id(e_);
  warp_ = B.CreateLShr(tid_, 5);
  lane_ = B.CreateAnd(tid_, e_.c32(31));
  g_ = B.CreateLShr(lane_, 2);             // fragment row (and row + 8)
  t4_ = B.CreateAnd(lane_, e_.c32(3));     // fragment column pair
  smem_ = tile::shared_u32(e_, tile::shared_base(e_));
  if (plan.smem_align > 1) smem_ = B.CreateAnd(B.CreateAdd(smem_, e_.c32(plan.smem_align - 1)), e_.c32(-plan.smem_align));
  q_smem_ = SmemTile{B.CreateAdd(smem_, e_.c32(plan.smem.q)), BM};
  multiplier_ = plan.spec->score ? e_.cf(1.f) : scale_log2_;
  if (PERSISTENT) {  // no varlen, paging or GQA packing: the launch's lengths; tiles in run_persistent()
    seq_q_ = rows_ = arg(kParamSeqQ);
    seq_kv_ = arg(kParamSeqKv);
    q_tiles_ = B.CreateUDiv(B.CreateAdd(rows_, e_.c32(BM - 1)), e_.c32(BM));
    return;
  }
  batch_ = tile::block_id(e_, 2);
  const SequenceView seq = sequence_view(e_, fn_, batch_, VARLEN, PAGED);
  seq_q_ = seq.seq_q, seq_kv_ = seq.seq_kv, q0_ = seq.q0, kv0_ = seq.kv0, page_table_ = seq.page_table;
  // Grid x = split · q_tiles + query tile (templates/common/forward_abi.hpp); q_tiles from the
  // grid, since a varlen sequence may be shorter than the longest one the grid is sized for.
  rows_ = G > 1 ? B.CreateMul(seq_q_, e_.c32(G)) : seq_q_;
  Value* x = tile::block_id(e_, 0);
  Value* q_tiles = SPLIT ? B.CreateUDiv(tile::grid_dim(e_, 0), arg(kParamSplits)) : nullptr;
  split_ = SPLIT ? B.CreateUDiv(x, q_tiles) : nullptr;
  Value* q_tile = SPLIT ? B.CreateSub(x, B.CreateMul(split_, q_tiles)) : x;
  Value* ordered_head = nullptr;  // the grid's (x, y) as one index over the batch's heads
  if (plan.tiles_across_heads) {
    Value* grid_x = tile::grid_dim(e_, 0);  // unsplit: the query tiles
    const OrderedTile o = ordered_tile(e_, spec_, B.CreateAdd(x, B.CreateMul(tile::block_id(e_, 1), grid_x)), grid_x,
                                       tile::grid_dim(e_, 1), arg(kParamSeqKv), arg(kParamGroup));
    q_tile = o.q_tile, ordered_head = o.unit;
  } else if (plan.last_tile_first) {
    q_tile = B.CreateSub(B.CreateSub(tile::grid_dim(e_, 0), e_.c32(1)), x);
  }
  if (VARLEN) {  // tiles past this sequence's rows: nothing to do (before any barrier)
    llvm::BasicBlock* work = llvm::BasicBlock::Create(e_.ctx, "work", fn_);
    llvm::BasicBlock* idle = llvm::BasicBlock::Create(e_.ctx, "idle", fn_);
    B.CreateCondBr(B.CreateICmpSGE(B.CreateMul(q_tile, e_.c32(BM)), rows_), idle, work);
    B.SetInsertPoint(idle);
    B.CreateRetVoid();
    B.SetInsertPoint(work);
  }
  Value *head, *head_kv;
  if (G > 1) {
    head_kv = tile::block_id(e_, 1);          // grid y = K/V heads; the CTA serves all G of its group
    head = B.CreateMul(head_kv, e_.c32(G));  // the group's first query head
  } else {
    head = ordered_head ? ordered_head : tile::block_id(e_, 1);
    head_kv = B.CreateUDiv(head, arg(kParamGroup));  // GQA/MQA: query heads share a K/V head
  }
  enter_tile(q_tile, head, head_kv, G > 1 ? B.CreateMul(tile::grid_dim(e_, 1), e_.c32(G)) : nullptr, nullptr);
}

// The tensor's slice [batch_, 0, h] (paged K/V: rows through the table; varlen: the sequence's
// first token).
Value* ForwardKernel::tensor_base(int param, int t, Value* h) {
  Value* off = PAGED && t > 0 ? slice_offset(e_, strides_[t], e_.c32(0), e_.c32(0), h)
               : VARLEN       ? slice_offset(e_, strides_[t], e_.c32(0), t == 0 ? q0_ : kv0_, h)
                              : slice_offset(e_, strides_[t], batch_, e_.c32(0), h);
  return e_.b.CreateGEP(e_.b.getInt16Ty(), arg(param), off);
}

// Everything that depends on the query tile, its head and batch_: the tensors' slices, the rows,
// the expression inputs and the key tiles to walk. `heads_q`, `batches`: null for the grid's.
void ForwardKernel::enter_tile(Value* q_tile, Value* head, Value* head_kv, Value* heads_q, Value* batches) {
  q_tile_ = q_tile, head_ = head, head_kv_ = head_kv;
  q_base_ = tensor_base(kParamQ, 0, head_);
  k_base_ = tensor_base(kParamK, 1, head_kv_);
  v_base_ = tensor_base(kParamV, 2, head_kv_);
  const TileRows rows = tile_rows(e_, q_tile_, BM, rows_);
  q_start_ = rows.first;
  q_last_ = rows.last;
  q_first_ = query_of(q_start_);
  q_final_ = query_of(q_last_);
  ex_ = expr_inputs(e_, *plan_.spec, batch_, head_, head_kv_, heads_q, batches);
  ex_.seq_q = seq_q_;  // this sequence's lengths (varlen); the launch's otherwise
  ex_.seq_kv = seq_kv_;
  find_key_tiles();
}

// Tile t of a persistent walk (ForwardPlan::persistent): ForwardPlan::persistent's order, or
// with tiles_across_heads ordered_tile's.
ForwardKernel::TileAt ForwardKernel::tile_at(Value* t) {
  auto& B = e_.b;
  Value* heads = arg(kParamGridHeads);
  Value *q_tile, *hb;
  if (plan_.tiles_across_heads) {
    const OrderedTile o = ordered_tile(e_, spec_, t, q_tiles_, B.CreateMul(heads, arg(kParamGridBatch)),
                                       arg(kParamSeqKv), arg(kParamGroup));
    q_tile = o.q_tile, hb = o.unit;
  } else {
    hb = B.CreateUDiv(t, q_tiles_);
    Value* x = B.CreateSub(t, B.CreateMul(hb, q_tiles_));
    q_tile = plan_.last_tile_first ? B.CreateSub(B.CreateSub(q_tiles_, e_.c32(1)), x) : x;
  }
  return {q_tile, B.CreateURem(hb, heads), B.CreateUDiv(hb, heads)};
}

void ForwardKernel::enter_tile_at(Value* t) {
  const TileAt at = tile_at(t);
  batch_ = at.batch;
  enter_tile(at.q_tile, at.head, e_.b.CreateUDiv(at.head, arg(kParamGroup)), arg(kParamGridHeads),
             arg(kParamGridBatch));
}

// Keys to visit and keys needing no mask: the closed form (never a block mask) or, for masks it
// cannot describe exactly, the list the block-map pre-pass wrote for this query tile.
void ForwardKernel::find_key_tiles() {
  auto& B = e_.b;
  const dsl::KvRange* range = plan_.spec->mask ? &plan_.spec->kv_range : nullptr;
  bounds_ = emit_kv_bounds(e_, range, kv_bounds_inputs(e_, ex_, q_first_, q_final_));
  const TileSpan span = covering_tiles(e_, bounds_, BN);
  if (plan_.wg_key_ranges) {  // a warpgroup's 64 rows, [first, last]; none in a short last tile
    // The warpgroup's index broadcast from lane 0, as CUTLASS's canonical_warp_group_idx: ptxas
    // then computes the bounds below on the uniform datapath (38 fewer instructions in the d = 64
    // causal kernel's SASS than from tid / 128 directly).
    Value* wg = tile::shfl_idx(e_, B.CreateLShr(tid_, e_.c32(7)), 0);
    const TileRows own_rows = tile_rows(e_, B.CreateAdd(B.CreateShl(q_tile_, 1), wg), 64, rows_);
    wg_bounds_ =
        emit_kv_bounds(e_, range, kv_bounds_inputs(e_, ex_, query_of(own_rows.first), query_of(own_rows.last)));
    const TileSpan own = covering_tiles(e_, wg_bounds_, BN);
    wg_first_ = own.first;
    wg_end_ = B.CreateSelect(B.CreateICmpSGT(own_rows.first, own_rows.last), own.first, own.end);
  }
  Value* n_tiles = B.CreateBinaryIntrinsic(llvm::Intrinsic::smax, B.CreateSub(span.end, span.first), e_.c32(0));
  Value* list = nullptr;
  if (plan_.has_map()) {
    BlockMapRow row = block_map_row(e_, *plan_.spec, plan_.config, ex_, q_tile_);
    n_tiles = B.CreateAlignedLoad(e_.i32(), row.count, llvm::Align(4));
    list = row.tiles;
  }
  if (!SPLIT) {
    walk_ = std::make_unique<TileWalk>(e_, span.first, n_tiles, list, S);
    return;
  }
  // Split s of n walks steps [n·s / splits, n·(s + 1) / splits): runs differ by at most one tile.
  Value* n = B.CreateZExt(n_tiles, e_.i64());
  Value* splits = B.CreateZExt(arg(kParamSplits), e_.i64());
  Value* s = B.CreateZExt(split_, e_.i64());
  Value* begin = B.CreateTrunc(B.CreateUDiv(B.CreateMul(n, s), splits), e_.i32());
  Value* end = B.CreateTrunc(B.CreateUDiv(B.CreateMul(n, B.CreateAdd(s, e_.c64(1))), splits), e_.i32());
  if (list) list = B.CreateGEP(e_.i32(), list, begin);
  walk_ = std::make_unique<TileWalk>(e_, B.CreateAdd(span.first, begin), B.CreateSub(end, begin), list, S);
}

SmemTile ForwardKernel::stage_tile(int region, int stage_bytes, Value* stage) {
  auto& B = e_.b;
  return SmemTile{B.CreateAdd(B.CreateAdd(smem_, e_.c32(region)), B.CreateMul(stage, e_.c32(stage_bytes))), BN};
}

// Step j of the walk covers keys [tile·BN, +BN) and lives in stage j % S.
tile::GlobalRows ForwardKernel::kv_rows(Value* j, Value* entry, int t) {
  tile::GlobalRows r{t == 1 ? k_base_ : v_base_, strides_[t][1],
                     e_.b.CreateMul(walk_->tile(e_, j, entry), e_.c32(BN)), seq_kv_};
  if (PAGED)
    r.page_table = page_table_, r.page_size = arg(kParamPageSize), r.page_stride = strides_[t][0],
    r.page_rows = plan_.target.page_size;
  return r;
}

// `ahead`: the loop's issue, which takes its pages' table entries from pages_ahead_ (when kept)
// and loads step j + 1's there, so a table load has a whole step to arrive instead of standing
// between the warp and its cp.asyncs (paged decode with short walks per CTA, §12.2 of
// docs/perf-notes.md).
void ForwardKernel::issue_kv(Value* j, Value* entry, bool once, bool ahead, int parts) {
  auto& B = e_.b;
  Value* stage = stage_of(j);
  tile::GlobalRows k = kv_rows(j, entry, 1), v = kv_rows(j, entry, 2);
  // K and V rows are the same keys: their pages' table entries are loaded once for both.
  if (tile::pages_per_tile(k, BN)) {
    if (ahead && !pages_ahead_.empty())
      for (auto* var : pages_ahead_) k.page_ids.push_back(B.CreateLoad(e_.i32(), var));
    else
      k.page_ids = tile::tile_pages(e_, k, BN);
    v.page_ids = k.page_ids;
  }
  // With a producer warpgroup only it issues copies: its 128 threads share them.
  const int threads = PRODUCER ? 128 : plan_.threads;
  Value* tid = PRODUCER ? B.CreateSub(tid_, e_.c32(plan_.compute_threads)) : tid_;
  if (parts & 1)
    tile::copy_rows(e_, stage_tile(plan_.smem.k, plan_.smem.k_stage, stage), k, spec_.head_dim_qk, threads, tid, once);
  if (parts & 2)
    tile::copy_rows(e_, stage_tile(plan_.smem.v, plan_.smem.v_stage, stage), v, spec_.head_dim_v, threads, tid, once);
  if (ahead && !pages_ahead_.empty()) keep_pages_ahead(B.CreateAdd(j, e_.c32(1)));
}

// The table entries of step j's pages into pages_ahead_: closed-form walks only (a listed walk's
// next tile is itself a load), and only where a tile's pages are looked up once per page.
void ForwardKernel::keep_pages_ahead(Value* j) {
  if (!PAGED || walk_->has_list()) return;
  tile::GlobalRows k = kv_rows(j, nullptr, 1);
  if (!tile::pages_per_tile(k, BN)) return;
  std::vector<Value*> ids = tile::tile_pages(e_, k, BN);
  if (pages_ahead_.empty())
    for (size_t i = 0; i < ids.size(); ++i) pages_ahead_.push_back(e_.var(e_.i32(), "page.ahead"));
  for (size_t i = 0; i < ids.size(); ++i) e_.b.CreateStore(ids[i], pages_ahead_[i]);
}

void ForwardKernel::load_q() { load_q_rows(q_smem_, q_base_, q_start_, plan_.compute_threads, tid_); }

void ForwardKernel::load_q_rows(const SmemTile& dst, Value* q_base, Value* q_start, int threads, Value* tid) {
  tile::copy_rows(e_, dst, {q_base, strides_[0][1], q_start, rows_, G, strides_[0][2]}, spec_.head_dim_qk, threads, tid,
                  /*once=*/true);
  tile::cp_async_commit(e_);
}

// Q, then the first num_stages − 1 K/V tiles, one commit group each (the CTA-wide pipeline; a
// producer warpgroup's plan is persistent: run_persistent()).
void ForwardKernel::load_q_and_first_kv_tiles() {
  auto& B = e_.b;
  Value* zero = e_.c32(0);
  if (TMA) {
    load_q_and_first_kv_tiles_by_tma();
    return;
  }
  load_q();
  for (int s = 0; s + 1 < S; ++s) {
    e_.when(B.CreateICmpSLT(e_.c32(s), walk_->count()), "prologue",
            [&] { issue_kv(e_.c32(s), walk_->entry(e_, zero, s), /*once=*/true); });
    tile::cp_async_commit(e_);
  }
  keep_pages_ahead(e_.c32(S - 1));
  tile::cp_async_wait(e_, S - 1);  // the Q group is complete
  start_products();
}

// The tensor-core products, and Q (and whatever else the CTA wrote) published to every warp.
void ForwardKernel::start_products() {
  tc_ = tile::make_tensor_core(plan_.wgmma,
                               {spec_.dtype, BM, BN, plan_.k_steps, OT, plan_.m_tiles, plan_.q_in_registers,
                                /*whole_pv=*/spec_.head_dim_v == 256 || (plan_.pingpong && spec_.head_dim_v == 128),
                                /*one_statement=*/true},
                               warp_, lane_);
  tc_->publish_shared(e_);
  tile::sync_threads(e_);
}

void ForwardKernel::prepare_products() { tc_->prepare(e_, q_smem_); }

// Per m-tile: the rows' max and sum, the O accumulators, and the S tile between its steps.
void ForwardKernel::init_state() {
  const int MT = plan_.m_tiles;
  softmax_.m.resize(MT);
  softmax_.l.resize(MT);
  o_.vars.assign(MT, std::vector<std::array<llvm::AllocaInst*, 4>>(OT));
  s_vars_.vars.assign(MT, std::vector<std::array<llvm::AllocaInst*, 4>>(NT));
  for (int mt = 0; mt < MT; ++mt) {
    for (int r = 0; r < 2; ++r) {
      softmax_.m[mt][r] = e_.var(e_.f32(), "m", e_.neg_inf());
      softmax_.l[mt][r] = e_.var(e_.f32(), "l", e_.cf(0.f));
    }
    for (auto& t : o_.vars[mt])
      for (auto& x : t) x = e_.var(e_.f32(), "o", e_.cf(0.f));
    for (auto& t : s_vars_.vars[mt])
      for (auto& x : t) x = e_.var(e_.f32(), "s");
  }
}

// With a producer: step j waits for its stage's full mbarrier (phase j / S, j counted from the
// persistent walk's first tile) and frees the stage when the products that read it have been
// waited for, which body() does before it returns. With ForwardPlan::kv_bars those are the K
// tile's: body() frees K once S is done and waits for V before P·V (scores, accumulate_output),
// and the step then frees V.
void ForwardKernel::for_each_key_tile(const std::function<void(KeyTile&)>& body) {
  auto& B = e_.b;
  if (PRODUCER) {
    e_.loop(e_.c32(0), walk_->count(), 1, "kv", [&](Value* j) {
      Value* stage = stage_of(j);
      const TileWalk::Step step = walk_->begin_step(e_, j);  // a listed walk's entries, one step ahead
      Value* parity = parity_of(j);
      tile::mbarrier_wait(e_, full_bar(stage), parity);
      if (!TMA) tc_->publish_shared(e_);  // cp.async writes through the generic proxy, TMA the async one
      KeyTile t = key_tile(j, step.now);
      if (KV_BARS) t.stage = stage, t.parity = parity;
      body(t);
      if (plan_.stage_in_v)  // the last step's V stage holds O until it is read out
        e_.when(B.CreateICmpSLT(B.CreateAdd(j, e_.c32(1)), walk_->count()), "v.free",
                [&] { release(v_empty_bar(stage)); });
      else
        release(KV_BARS ? v_empty_bar(stage) : empty_bar(stage));
    });
    return;
  }
  if (TMA) {
    tma_key_tiles(body);
    return;
  }
  e_.loop(e_.c32(0), walk_->count(), 1, "kv", [&](Value* j) {
    TileWalk::Step step = walk_->begin_step(e_, j);
    e_.when(B.CreateICmpSLT(B.CreateAdd(j, e_.c32(S - 1)), walk_->count()), "issue", [&] {
      issue_kv(B.CreateAdd(j, e_.c32(S - 1)), walk_->entry(e_, j, S - 1, step.last), /*once=*/false,
               /*ahead=*/true);
    });
    tile::cp_async_commit(e_);  // possibly empty: keeps "S − 1 groups pending" true at every wait
    tile::cp_async_wait(e_, S - 1);
    tc_->publish_shared(e_);
    tile::sync_threads(e_);
    KeyTile t = key_tile(j, step.now);
    body(t);
    tile::sync_threads(e_);  // this stage is refilled by the next iteration's cp.async
  });
  tile::cp_async_wait(e_, 0);
}

KeyTile ForwardKernel::key_tile(Value* j, Value* entry) {
  auto& B = e_.b;
  KeyTile t;
  t.j = j;
  Value* stage = stage_of(j);
  t.k = stage_tile(plan_.smem.k, plan_.smem.k_stage, stage);
  t.v = stage_tile(plan_.smem.v, plan_.smem.v_stage, stage);
  t.entry = entry;
  t.n0 = B.CreateMul(walk_->tile(e_, j, walk_->entry(e_, j, 0, entry)), e_.c32(BN));
  return t;
}

// Element (nt, i) of m-tile mt: key n0 + 8·nt + 2·t4 + (i & 1), row g + 8·(i >> 1).
Value* ForwardKernel::row_of(int mt, int i) {
  auto& B = e_.b;
  Value* row_g = B.CreateAdd(q_start_, B.CreateAdd(tc_->warp_row0(), B.CreateAdd(e_.c32(16 * mt), g_)));
  return B.CreateAdd(row_g, e_.c32(8 * (i >> 1)));
}

Value* ForwardKernel::key_of(const KeyTile& t, int nt, int i) {
  auto& B = e_.b;
  return B.CreateAdd(t.n0, B.CreateAdd(e_.c32(nt * 8 + (i & 1)), B.CreateShl(t4_, 1)));
}

void ForwardKernel::release(Value* bar) {
  e_.when(e_.b.CreateICmpEQ(lane_, e_.c32(0)), "release", [&] { tile::mbarrier_arrive(e_, bar); });
}

void ForwardKernel::wait_v(Value* stage, Value* parity) {
  tile::mbarrier_wait(e_, v_full_bar(stage), parity);
  if (!TMA) tc_->publish_shared(e_);
}

// A turn's barrier counts 256 threads: the 128 of the warpgroup waiting for it and the 128 of the
// other, which arrive when they have issued their product.
void ForwardKernel::turn_wait() {
  Value* wg = e_.b.CreateLShr(warp_, e_.c32(2));
  tile::sync_named(e_, e_.b.CreateAdd(wg, e_.c32(kTurnBarrier)), 256);
}
void ForwardKernel::turn_pass() {
  Value* wg = e_.b.CreateLShr(warp_, e_.c32(2));
  tile::arrive_named(e_, e_.b.CreateSub(e_.c32(kTurnBarrier + 1), wg), 256);
}

RegTile ForwardKernel::scores(const KeyTile& t) {
  RegTile s;
  if (plan_.pingpong) {
    turn_wait();
    s = tc_->mma_abt_async(e_, t.k);
    turn_pass();
    tc_->wait(e_, s, 0);
  } else {
    s = tc_->mma_abt(e_, t.k);
  }
  if (t.stage) release(empty_bar(t.stage));
  if (plan_.stage_in_v)  // Q's last product is done: the producer may load the next tile's Q
    e_.when(e_.b.CreateICmpEQ(e_.b.CreateAdd(t.j, e_.c32(1)), walk_->count()), "q.free",
            [&] { release(walk_bar(kQEmpty, 0)); });
  return s;
}

void ForwardKernel::accumulate_output(const RegTile& p, const KeyTile& t) {
  if (t.stage) wait_v(t.stage, t.parity);
  RegTile acc = o_.load(e_);
  if (plan_.pingpong) {
    std::vector<Value*> p_regs = tc_->pack_p(e_, p);
    turn_wait();
    tc_->mma_pv_async(e_, acc, p_regs, t.v);
    turn_pass();
    tc_->wait(e_, acc, 0);
  } else {
    tc_->mma_pv(e_, acc, p, t.v);
  }
  o_.store(e_, acc);
}

}  // namespace fwd

llvm::Function* emit_attention_forward(llvm::Module& module, const ForwardPlan& plan, const std::string& entry) {
  fwd::ForwardKernel k(module, plan, entry);
  auto step = [&](fwd::KeyTile& t) {
    tile::RegTile s = k.scores(t);  // S = Q Kᵀ
    k.modify_scores(s, t);    // score modifier, on scale·S
    k.mask_scores(s, t);      // the mask, where the tile is not wholly visible
    k.softmax_step(s);        // online softmax: P = exp(S − m), l, O rescaled
    k.accumulate_output(s, t);  // O += P V
  };
  if (plan.persistent) {
    k.run_persistent(step);  // the same steps, tile after tile
    return k.function();
  }
  k.load_q_and_first_kv_tiles();
  k.prepare_products();
  k.init_state();
  k.for_each_key_tile(step);
  k.store_output();
  k.finish();
  return k.function();
}

}  // namespace flashjit

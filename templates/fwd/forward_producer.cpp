// The forward's producer warpgroup (ForwardPlan::producer) and its persistent walk
// (ForwardPlan::persistent): warp specialisation as in FlashAttention-3 (Shah et al. 2024, §3.1),
// the producer issuing K/V copies into the stage ring while the compute warpgroups only compute.
#include "compiler/tile/bulk.hpp"
#include "compiler/tile/copy.hpp"
#include "compiler/tile/gpu.hpp"
#include "compiler/tile/inline_ptx.hpp"
#include "compiler/tile/mbarrier.hpp"
#include "compiler/tile/mma.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/fwd/forward_kernel.hpp"
#include "templates/fwd/sequence.hpp"

namespace flashjit::fwd {
// Thread 0 initialises the mbarriers, which a CTA barrier publishes to every warp; returns whether
// this thread is the producer's. Registers then move from the producer to the compute warpgroups
// (PTX ISA §9.7.17.1, setmaxnreg), within the launch's allocation (ForwardPlan::producer_registers).
Value* ForwardKernel::split_warpgroups() {
  auto& B = e_.b;
  const int warps = plan_.config.num_warps;
  // "Full": one cp.async arrival per producer thread, or the TMA thread's expect_tx arrival.
  const int loaders = TMA ? 1 : 128;
  e_.when(B.CreateICmpEQ(tid_, e_.c32(0)), "init_bars", [&] {
    for (int s = 0; s < S; ++s) {
      tile::mbarrier_init(e_, full_bar(e_.c32(s)), loaders);
      tile::mbarrier_init(e_, empty_bar(e_.c32(s)), warps);  // one arrival per compute warp
      if (!KV_BARS) continue;
      tile::mbarrier_init(e_, v_full_bar(e_.c32(s)), loaders);
      tile::mbarrier_init(e_, v_empty_bar(e_.c32(s)), warps);
    }
    for (int b = 0; b < 2; ++b) {
      tile::mbarrier_init(e_, walk_bar(kSlotFull, b), 1);  // the claiming thread
      // Every other warp that walks: the producer's other three exit at once under TMA.
      tile::mbarrier_init(e_, walk_bar(kSlotEmpty, b), TMA ? warps : warps + 3);
      if (!Q_AHEAD) continue;
      tile::mbarrier_init(e_, walk_bar(kQFull, b), loaders);
      tile::mbarrier_init(e_, walk_bar(kQEmpty, b), warps);  // one arrival per compute warp
    }
  });
  start_products();
  return B.CreateICmpUGE(warp_, e_.c32(warps));
}

// The persistent walk's mbarriers after the stages' (ForwardSmem::barriers), two of each kind.
Value* ForwardKernel::walk_bar(int kind, int b) {
  return e_.b.CreateAdd(bars_, e_.c32(plan_.smem.walk_bars + 16 * kind + 8 * b));
}
Value* ForwardKernel::walk_bar(int kind, Value* b) {
  return e_.b.CreateAdd(walk_bar(kind, 0), e_.b.CreateShl(b, e_.c32(3)));
}

// Round u of a two-buffer ring (the tile slot, the Q buffers) uses buffer u % 2 in its (u / 2)-th
// phase. A waiter for the data waits for that phase's parity; a writer refilling the buffer
// (u ≥ 2) waits for the previous phase of its "empty" mbarrier.
namespace {
struct Ring {
  Value *buffer, *full_parity, *empty_parity, *refill;
};
Ring ring_at(tile::Emitter& e, Value* u, int buffers = 2) {
  auto& B = e.b;
  if (buffers == 1)
    return {e.c32(0), B.CreateAnd(u, e.c32(1)), B.CreateAnd(B.CreateAdd(u, e.c32(1)), e.c32(1)),
            B.CreateICmpUGE(u, e.c32(1))};
  Value* phase = B.CreateLShr(u, e.c32(1));
  return {B.CreateAnd(u, e.c32(1)), B.CreateAnd(phase, e.c32(1)), B.CreateAnd(B.CreateAdd(phase, e.c32(1)), e.c32(1)),
          B.CreateICmpUGE(u, e.c32(2))};
}
}  // namespace

// Persistent walks (ForwardPlan::persistent) hand each claimed tile index from the producer's
// first thread to the other eleven warps through a double-buffered shared slot guarded by
// mbarriers (FlashAttention-3's scheduler hand-over): round r writes slot r mod 2 and arrives at its
// "full" mbarrier (release), readers wait on it (acquire), read, and arrive at its "empty" one,
// which the writer waits on before round r + 2 writes the slot again. The producer waits for no
// other warp at the tile boundary, so it runs on into the next tile's copies while the compute
// warps finish this one. compute-sanitizer's racecheck reports the arrive/sync named-barrier form
// of the same hand-over as a hazard and the mbarrier form as none (docs/perf-notes.md §27).
Value* ForwardKernel::tile_slot(Value* b) {
  return e_.b.CreateAdd(bars_, e_.b.CreateAdd(e_.c32(plan_.smem.tile_slots), e_.b.CreateShl(b, e_.c32(2))));
}

void ForwardKernel::publish_tile(Value* t, Value* round) {
  auto& B = e_.b;
  const Ring r = ring_at(e_, round);
  e_.when(B.CreateICmpEQ(lane_, e_.c32(0)), "tile.write", [&] {
    e_.when(r.refill, "tile.slot", [&] { tile::mbarrier_wait(e_, walk_bar(kSlotEmpty, r.buffer), r.empty_parity); });
    tile::inline_ptx(e_, B.getVoidTy(), {tile_slot(r.buffer), t}, "st.shared.u32 [$0], $1;", "r,r,~{memory}");
    tile::mbarrier_arrive(e_, walk_bar(kSlotFull, r.buffer));
  });
}

// Lane 0 reads the slot and hands the index to its warp, so its arrival follows the warp's read.
Value* ForwardKernel::take_tile(Value* round) {
  auto& B = e_.b;
  const Ring r = ring_at(e_, round);
  llvm::AllocaInst* got = e_.var(e_.i32(), "tile.got", e_.c32(0));
  e_.when(B.CreateICmpEQ(lane_, e_.c32(0)), "tile.read", [&] {
    tile::mbarrier_wait(e_, walk_bar(kSlotFull, r.buffer), r.full_parity);
    B.CreateStore(tile::inline_ptx(e_, e_.i32(), {tile_slot(r.buffer)}, "ld.shared.u32 $0, [$1];", "=r,r,~{memory}"),
                  got);
    tile::mbarrier_arrive(e_, walk_bar(kSlotEmpty, r.buffer));
  });
  return tile::shfl_idx(e_, B.CreateLoad(e_.i32(), got), 0);
}

// Q buffer `b` of the two (ForwardPlan::q_buffers).
SmemTile ForwardKernel::q_buffer(Value* b) {
  auto& B = e_.b;
  Value* second = B.CreateAdd(smem_, e_.c32(plan_.smem.q2));
  return SmemTile{B.CreateSelect(B.CreateICmpEQ(b, e_.c32(0)), q_smem_.base, second), BM};
}

// `while (t < total()) body(t);` with t in a variable that body advances.
void ForwardKernel::tile_loop(llvm::AllocaInst* t, const std::function<Value*()>& total, const char* name,
                              const std::function<void(Value*)>& body) {
  auto& B = e_.b;
  llvm::BasicBlock* head = llvm::BasicBlock::Create(e_.ctx, std::string(name) + ".head", fn_);
  llvm::BasicBlock* work = llvm::BasicBlock::Create(e_.ctx, std::string(name) + ".body", fn_);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(e_.ctx, std::string(name) + ".exit", fn_);
  B.CreateBr(head);
  B.SetInsertPoint(head);
  Value* now = B.CreateLoad(e_.i32(), t);
  B.CreateCondBr(B.CreateICmpSLT(now, total()), work, done);
  B.SetInsertPoint(work);
  body(now);
  B.CreateBr(head);
  B.SetInsertPoint(done);
}

// ForwardPlan::persistent. The pipeline's step (stage and mbarrier phase) runs on across tiles.
// Every warp knows the CTA's first tile; the producer's first thread claims each next one once
// this tile's copies are issued, num_stages steps before the compute warps finish it: claimed when
// the tile starts, a CTA would hold one tile in reserve through a whole long tile while others ran
// dry (§23 of docs/perf-notes.md). With two Q buffers (ForwardPlan::q_buffers) the producer loads
// each tile's Q, once the tile two back is done with its buffer, and then its K/V stages; the
// compute warps free the buffer when their last product of the tile has been waited for, take the
// next index and store this tile's O. With one under ForwardPlan::stage_in_v the producer loads
// it the same way, once the tile's last S frees it. Otherwise, with one, the compute warps load the
// next tile's Q themselves once all of them are past their last product, before they store O; the
// producer still runs on into the next tile's K/V.
void ForwardKernel::run_persistent(const std::function<void(KeyTile&)>& body) {
  auto& B = e_.b;
  Value* first = B.CreateAdd(tile::block_id(e_, 0),
                             B.CreateMul(tile::grid_dim(e_, 0), B.CreateAdd(tile::block_id(e_, 1),
                                                                            B.CreateMul(tile::grid_dim(e_, 1),
                                                                                        tile::block_id(e_, 2)))));
  Value* stride = B.CreateMul(tile::grid_dim(e_, 0), B.CreateMul(tile::grid_dim(e_, 1), tile::grid_dim(e_, 2)));
  // The tile count, rebuilt where it is compared: LLVM would keep one product live through the
  // whole kernel, and where S and O fill the registers (d = 256, 128-key tiles) ptxas spilled it.
  auto total = [&] {
    auto opaque = [&](Value* x) { return tile::in_loop(e_, x); };
    return B.CreateMul(opaque(q_tiles_), B.CreateMul(opaque(arg(kParamGridHeads)), opaque(arg(kParamGridBatch))));
  };
  llvm::AllocaInst* steps = e_.var(e_.i32(), "steps", e_.c32(0));  // pipeline steps of the tiles before
  llvm::AllocaInst* tile = e_.var(e_.i32(), "tile", first);
  llvm::AllocaInst* round = e_.var(e_.i32(), "tile.round", e_.c32(0));  // tiles walked so far
  bars_ = B.CreateAdd(smem_, e_.c32(plan_.smem.barriers));
  // The Q ring at this round: one buffer with stage_in_v, two where Q is otherwise loaded ahead.
  auto q_ring = [&] { return ring_at(e_, B.CreateLoad(e_.i32(), round), plan_.stage_in_v ? 1 : 2); };
  Value* producer = split_warpgroups();
  auto walk = [&](Value* t) {
    enter_tile_at(t);
    step0_ = B.CreateLoad(e_.i32(), steps);
  };
  // The walk's next tile: claimed by the producer's first thread, taken by every other warp.
  auto advance = [&](Value* is_lead) {
    Value* u = B.CreateLoad(e_.i32(), round);
    B.CreateStore(B.CreateAdd(step0_, walk_->count()), steps);
    B.CreateStore(B.CreateAdd(u, e_.c32(1)), round);
    llvm::BasicBlock* claim = llvm::BasicBlock::Create(e_.ctx, "tile.claim", fn_);
    llvm::BasicBlock* take = llvm::BasicBlock::Create(e_.ctx, "tile.take", fn_);
    llvm::BasicBlock* next = llvm::BasicBlock::Create(e_.ctx, "tile.next", fn_);
    B.CreateCondBr(is_lead, claim, take);
    B.SetInsertPoint(claim);
    llvm::AllocaInst* claimed = e_.var(e_.i32(), "tile.claimed", e_.c32(0));
    e_.when(B.CreateICmpEQ(lane_, e_.c32(0)), "tile.count", [&] {
      Value* old = B.CreateAtomicRMW(llvm::AtomicRMWInst::Add, arg(kParamTileCounter), e_.c32(1), llvm::MaybeAlign(4),
                                     llvm::AtomicOrdering::Monotonic);
      B.CreateStore(B.CreateAdd(old, stride), claimed);
    });
    Value* mine = tile::shfl_idx(e_, B.CreateLoad(e_.i32(), claimed), 0);
    publish_tile(mine, u);
    B.CreateStore(mine, tile);
    B.CreateBr(next);
    B.SetInsertPoint(take);
    B.CreateStore(take_tile(u), tile);
    B.CreateBr(next);
    B.SetInsertPoint(next);
  };
  llvm::BasicBlock* prod = llvm::BasicBlock::Create(e_.ctx, "producer", fn_);
  llvm::BasicBlock* compute = llvm::BasicBlock::Create(e_.ctx, "compute", fn_);
  B.CreateCondBr(producer, prod, compute);

  B.SetInsertPoint(prod);
  tile::set_max_registers(e_, plan_.producer_registers, false);
  Value* lead = B.CreateICmpEQ(warp_, e_.c32(plan_.config.num_warps));  // the producer's first warp
  if (TMA) {  // one thread issues every load: the producer's first warp walks, the others leave
    llvm::BasicBlock* walks = llvm::BasicBlock::Create(e_.ctx, "producer.lead", fn_);
    llvm::BasicBlock* leaves = llvm::BasicBlock::Create(e_.ctx, "producer.idle", fn_);
    B.CreateCondBr(lead, walks, leaves);
    B.SetInsertPoint(leaves);
    B.CreateRetVoid();
    B.SetInsertPoint(walks);
    address_tensor_maps();
    lead = B.getTrue();
  }
  tile_loop(tile, total, "tiles.produce", [&](Value* t) {
    walk(t);
    if (Q_AHEAD) {
      const Ring q = q_ring();
      e_.when(q.refill, "q.refill", [&] { tile::mbarrier_wait(e_, walk_bar(kQEmpty, q.buffer), q.empty_parity); });
      Value* full = walk_bar(kQFull, q.buffer);
      if (TMA) {
        e_.when(B.CreateICmpEQ(lane_, e_.c32(0)), "q.tma", [&] {
          tile::mbarrier_arrive_expect_tx(e_, full, plan_.smem.q_bytes);
          load_by_tma(kMapQ, q_buffer(q.buffer), spec_.head_dim_qk, q_start_, head_, full);
        });
      } else {
        load_q_rows(q_buffer(q.buffer), q_base_, q_start_, 128, B.CreateSub(tid_, e_.c32(plan_.compute_threads)));
        tile::cp_async_mbarrier_arrive(e_, full);
      }
    }
    produce();
    advance(lead);
  });
  // The thread's cp.async copies are waited for before it exits. Tensor loads complete on their
  // mbarriers, which the compute warps wait on before the CTA and its shared memory end (memcheck
  // and racecheck clean, docs/perf-notes.md §36).
  if (!TMA) tile::cp_async_wait(e_, 0);
  B.CreateRetVoid();

  B.SetInsertPoint(compute);
  tile::set_max_registers(e_, plan_.compute_registers, true);
  const int computing = plan_.compute_threads;
  auto load_q_of = [&](Value* t) {  // one Q buffer: the compute warps load it
    const TileAt at = tile_at(t);
    Value* off = slice_offset(e_, strides_[0], at.batch, e_.c32(0), at.head);
    load_q_rows(q_smem_, B.CreateGEP(B.getInt16Ty(), arg(kParamQ), off), B.CreateMul(at.q_tile, e_.c32(BM)), computing,
                tid_);
  };
  if (!Q_AHEAD) e_.when(B.CreateICmpSLT(first, total()), "first_q", [&] { load_q_of(first); });
  // The first turn is the first warpgroup's: the second hands it over once, before any product.
  // The second's last hand-over is never waited for; the barrier's count ends with the CTA.
  if (plan_.pingpong)
    e_.when(B.CreateICmpUGE(warp_, e_.c32(4)), "turn.first",
            [&] { tile::arrive_named(e_, e_.c32(kTurnBarrier), 256); });
  tile_loop(tile, total, "tiles", [&](Value* t) {
    walk(t);
    const Ring q = q_ring();
    if (Q_AHEAD) {
      tc_->prepare(e_, q_buffer(q.buffer));
      tile::mbarrier_wait(e_, walk_bar(kQFull, q.buffer), q.full_parity);
    } else {
      tc_->prepare(e_, q_smem_);
      tile::cp_async_wait(e_, 0);
      if (TMA) tc_->publish_shared(e_);  // no stage's fence follows to publish Q's cp.async
      tile::sync_named(e_, kComputeBarrier, computing);
    }
    init_state();
    if (ROTATED)
      rotated_walk();
    else
      for_each_key_tile(body);  // each product waited for before it returns
    if (plan_.stage_in_v) {
      // O goes through the last step's V stage once every warp's last P·V is done; an empty walk
      // has no stage and stages O in Q, freeing Q after the epilogue instead.
      Value* count = walk_->count();
      Value* any = B.CreateICmpSGT(count, e_.c32(0));
      tile::sync_named(e_, kComputeBarrier, computing);
      Value* last = stage_of(B.CreateSub(count, e_.c32(1)));
      o_stage_ = B.CreateSelect(any, stage_tile(plan_.smem.v, plan_.smem.v_stage, last).base, q_smem_.base);
      o_free_ = B.CreateSelect(any, v_empty_bar(last), walk_bar(kQEmpty, 0));
    } else if (Q_AHEAD)
      e_.when(B.CreateICmpEQ(lane_, e_.c32(0)), "q.release",
              [&] { tile::mbarrier_arrive(e_, walk_bar(kQEmpty, q.buffer)); });
    else
      tile::sync_named(e_, kComputeBarrier, computing);  // every product that reads Q has been waited for
    advance(B.getFalse());
    if (plan_.stage_in_q) {  // O out through the Q buffer, read out by every warp before Q's reload
      store_output();
      tile::sync_named(e_, kComputeBarrier, computing);
    }
    if (!Q_AHEAD) {
      Value* next = B.CreateLoad(e_.i32(), tile);
      e_.when(B.CreateICmpSLT(next, total()), "next_q", [&] { load_q_of(next); });
    }
    if (!plan_.stage_in_q) store_output();
  });
  B.CreateRetVoid();
}

// ForwardPlan::rotated: step j issues O += P_{j−1} V_{j−1}, then S_j = Q K_jᵀ, and waits once for
// both (FlashAttention-3 §3.2 pairs the same two products in a step, and also runs the softmax
// under P·V, which was slower here), so the tensor cores take the two back to back instead of
// idling at a wait between them; step j − 1's softmax
// has already rescaled O for its max. O's registers go through that wait too: they are the P·V
// product's accumulators. Step j's K stage is freed once S_j is done, step j − 1's V stage once
// its product is. The first step's S and the last P·V are issued on their own, so both products
// appear twice in the code, which costs ptxas ~35% more time than the walk that waits for each
// product; issuing each product from one place runs 2–5% slower (docs/perf-notes.md §34). With
// ForwardPlan::pingpong a warpgroup waits for its turn before issuing a step's products and hands
// it over once they are issued: the first S, each P·V with the next S, and the last P·V take one
// turn each, so both warpgroups take the same number of turns on a tile.
void ForwardKernel::rotated_walk() {
  auto& B = e_.b;
  Value* count = walk_->count();
  // P of the previous step, packed as the P·V product's A registers (bf16x2 or f16x2 each).
  std::vector<llvm::AllocaInst*> p_vars(BN / 16 * 4);
  for (auto*& v : p_vars) v = e_.var(e_.i32(), "p");
  auto issue_pv = [&](Value* prev) {  // O += P_{prev} V_{prev}, in flight
    wait_v(stage_of(prev), parity_of(prev));
    if (plan_.pingpong) turn_wait();
    std::vector<Value*> p;
    for (auto* v : p_vars) p.push_back(B.CreateLoad(e_.i32(), v));
    RegTile o = o_.load(e_);
    tc_->mma_pv_async(e_, o, p, stage_tile(plan_.smem.v, plan_.smem.v_stage, stage_of(prev)));
    return o;
  };
  auto issued_pv = [&](const RegTile& o, Value* prev) {  // after the wait
    o_.store(e_, o);
    release(v_empty_bar(stage_of(prev)));
  };
  e_.when(B.CreateICmpSGT(count, e_.c32(0)), "walk", [&] {
    e_.loop(e_.c32(0), count, 1, "kv", [&](Value* j) {
      KeyTile t = key_tile(j, walk_->begin_step(e_, j).now);
      tile::mbarrier_wait(e_, full_bar(stage_of(j)), parity_of(j));
      if (!TMA) tc_->publish_shared(e_);
      llvm::BasicBlock* first = llvm::BasicBlock::Create(e_.ctx, "kv.first", fn_);
      llvm::BasicBlock* later = llvm::BasicBlock::Create(e_.ctx, "kv.later", fn_);
      llvm::BasicBlock* join = llvm::BasicBlock::Create(e_.ctx, "kv.join", fn_);
      B.CreateCondBr(B.CreateICmpEQ(j, e_.c32(0)), first, later);
      B.SetInsertPoint(first);
      if (plan_.pingpong) turn_wait();
      RegTile s = tc_->mma_abt_async(e_, t.k);
      if (plan_.pingpong) turn_pass();
      tc_->wait(e_, s, 0);
      s_vars_.store(e_, s);
      B.CreateBr(join);
      B.SetInsertPoint(later);
      Value* prev = B.CreateSub(j, e_.c32(1));
      RegTile o = issue_pv(prev);
      s = tc_->mma_abt_async(e_, t.k);
      if (plan_.pingpong) turn_pass();
      std::vector<Value*> in_flight;
      for (auto& f : o[0]) in_flight.insert(in_flight.end(), f.begin(), f.end());
      tc_->wait(e_, s, 0, &in_flight);
      size_t k = 0;
      for (auto& f : o[0])
        for (Value*& x : f) x = in_flight[k++];
      s_vars_.store(e_, s);
      issued_pv(o, prev);
      B.CreateBr(join);
      B.SetInsertPoint(join);
      release(empty_bar(stage_of(j)));
      s = s_vars_.load(e_);
      modify_scores(s, t);
      mask_scores(s, t);
      softmax_step(s);
      std::vector<Value*> p = tc_->pack_p(e_, s);
      for (size_t i = 0; i < p.size(); ++i) B.CreateStore(p[i], p_vars[i]);
    });
    Value* last = B.CreateSub(count, e_.c32(1));
    RegTile o = issue_pv(last);
    if (plan_.pingpong) turn_pass();
    tc_->wait(e_, o, 0);
    issued_pv(o, last);
  });
}

// The producer's walk: each step waits until its stage's last readers are done (the previous
// phase of its empty mbarrier), issues the K and V copies and has the full mbarrier arrived at
// when they land (ForwardPlan::tma: lane 0 expects the tiles' bytes there and issues one tensor
// load per panel); with ForwardPlan::kv_bars K and V each have their own pair of mbarriers, K's
// copies going first. A listed walk (block map) keeps its own look-ahead entries: the producer
// and the compute warps each walk the list.
void ForwardKernel::produce() {
  auto& B = e_.b;
  e_.loop(e_.c32(0), walk_->count(), 1, "produce", [&](Value* j) {
    Value* stage = stage_of(j);
    Value* round = B.CreateUDiv(pipe_step(j), e_.c32(S));
    auto refill = [&](Value* empty) {
      e_.when(B.CreateICmpUGE(pipe_step(j), e_.c32(S)), "refill",
              [&] { tile::mbarrier_wait(e_, empty, B.CreateAnd(B.CreateAdd(round, e_.c32(1)), e_.c32(1))); });
    };
    refill(empty_bar(stage));
    const TileWalk::Step step = walk_->begin_step(e_, j);
    Value* entry = walk_->entry(e_, j, 0, step.now);
    if (TMA) {
      const int d_qk = spec_.head_dim_qk, d_v = spec_.head_dim_v;
      Value* row = B.CreateMul(walk_->tile(e_, j, entry), e_.c32(BN));
      SmemTile k = stage_tile(plan_.smem.k, plan_.smem.k_stage, stage);
      SmemTile v = stage_tile(plan_.smem.v, plan_.smem.v_stage, stage);
      Value* first = B.CreateICmpEQ(lane_, e_.c32(0));
      e_.when(first, "kv.tma", [&] {
        Value* full = full_bar(stage);
        tile::mbarrier_arrive_expect_tx(e_, full, plan_.smem.k_stage + (KV_BARS ? 0 : plan_.smem.v_stage));
        load_by_tma(kMapK, k, d_qk, row, head_kv_, full);
        if (!KV_BARS) load_by_tma(kMapV, v, d_v, row, head_kv_, full);
      });
      if (!KV_BARS) return;
      refill(v_empty_bar(stage));
      e_.when(first, "v.tma", [&] {
        tile::mbarrier_arrive_expect_tx(e_, v_full_bar(stage), plan_.smem.v_stage);
        load_by_tma(kMapV, v, d_v, row, head_kv_, v_full_bar(stage));
      });
      return;
    }
    if (!KV_BARS) {
      issue_kv(j, entry, /*once=*/false);
      tile::cp_async_mbarrier_arrive(e_, full_bar(stage));
      return;
    }
    issue_kv(j, entry, /*once=*/false, /*ahead=*/false, /*parts=*/1);
    tile::cp_async_mbarrier_arrive(e_, full_bar(stage));
    refill(v_empty_bar(stage));
    issue_kv(j, entry, /*once=*/false, /*ahead=*/false, /*parts=*/2);
    tile::cp_async_mbarrier_arrive(e_, v_full_bar(stage));
  });
}

}  // namespace flashjit::fwd

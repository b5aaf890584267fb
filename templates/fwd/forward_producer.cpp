// The forward's producer warpgroup (ForwardPlan::producer) and its persistent walk
// (ForwardPlan::persistent): warp specialisation as in FlashAttention-3 (Shah et al. 2024, §3.1),
// the producer issuing K/V copies into the stage ring while the compute warpgroups only compute.
#include "compiler/tile/copy.hpp"
#include "compiler/tile/gpu.hpp"
#include "compiler/tile/inline_ptx.hpp"
#include "compiler/tile/mbarrier.hpp"
#include "compiler/tile/mma.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/fwd/forward_kernel.hpp"
#include "templates/fwd/sequence.hpp"

namespace flashjit::fwd {
// The compute warps load Q; thread 0 initialises the stage mbarriers; after a CTA barrier the
// producer warpgroup leaves for produce() and the compute warpgroups go on.
void ForwardKernel::start_producer() {
  Value* producer = split_warpgroups(/*load_q=*/true);
  llvm::BasicBlock* prod = llvm::BasicBlock::Create(e_.ctx, "producer", fn_);
  llvm::BasicBlock* compute = llvm::BasicBlock::Create(e_.ctx, "compute", fn_);
  e_.b.CreateCondBr(producer, prod, compute);
  e_.b.SetInsertPoint(prod);
  tile::set_max_registers(e_, plan_.producer_registers, false);
  produce();
  tile::cp_async_wait(e_, 0);
  e_.b.CreateRetVoid();
  e_.b.SetInsertPoint(compute);
  tile::set_max_registers(e_, plan_.compute_registers, true);
}

// The mbarriers initialised (and Q loaded, when asked) and published to every warp; returns
// whether this thread is the producer's. Registers then move from the producer to the compute
// warpgroups (PTX ISA §9.7.17.1, setmaxnreg), within the launch's allocation
// (ForwardPlan::producer_registers).
Value* ForwardKernel::split_warpgroups(bool with_q) {
  auto& B = e_.b;
  const int warps = plan_.config.num_warps;
  if (!bars_) bars_ = B.CreateAdd(smem_, e_.c32(plan_.smem.barriers));
  e_.when(B.CreateICmpEQ(tid_, e_.c32(0)), "init_bars", [&] {
    for (int s = 0; s < S; ++s) {
      tile::mbarrier_init(e_, full_bar(e_.c32(s)), 128);     // one cp.async arrival per producer thread
      tile::mbarrier_init(e_, empty_bar(e_.c32(s)), warps);  // one arrival per compute warp
    }
  });
  Value* producer = B.CreateICmpUGE(warp_, e_.c32(warps));
  if (with_q)
    e_.when(B.CreateNot(producer), "load_q", [&] {
      load_q();
      tile::cp_async_wait(e_, 0);
    });
  start_products();  // Q (when loaded) and the initialised mbarriers, for every warp
  return producer;
}

// Persistent walks (ForwardPlan::persistent) hand each claimed tile index from the producer's
// first warp to the other eleven through a double-buffered shared slot and one named barrier that
// every thread of the CTA syncs at (PTX ISA §9.7.13.1: bar.sync orders the memory accesses of the
// threads taking part): round r writes slot r mod 2 before the barrier and is read after it. The
// write of round r + 2 into the same slot comes after the writer's sync of round r + 1, which
// needs every reader there, past its read of round r. The producer's other warps already waited
// at that barrier for the compute warps; the first warp now waits with them. The arrive/sync form
// (one slot, a second barrier for "slot empty") is as correct but compute-sanitizer's racecheck
// reports every such hand-over as a hazard (docs/perf-notes.md §27).
Value* ForwardKernel::tile_slot(Value* round) {
  auto& B = e_.b;
  return B.CreateAdd(bars_, B.CreateAdd(e_.c32(16 * S), B.CreateShl(B.CreateAnd(round, e_.c32(1)), e_.c32(2))));
}

void ForwardKernel::publish_tile(Value* t, Value* round) {
  auto& B = e_.b;
  e_.when(B.CreateICmpEQ(lane_, e_.c32(0)), "tile.write", [&] {
    tile::inline_ptx(e_, B.getVoidTy(), {tile_slot(round), t}, "st.shared.u32 [$0], $1;", "r,r,~{memory}");
  });
  tile::sync_named(e_, kTileFull, plan_.threads);
}

Value* ForwardKernel::take_tile(Value* round) {
  tile::sync_named(e_, kTileFull, plan_.threads);
  return tile::inline_ptx(e_, e_.i32(), {tile_slot(round)}, "ld.shared.u32 $0, [$1];", "=r,r,~{memory}");
}

// `while (t < total) body(t);` with t in a variable that body advances.
void ForwardKernel::tile_loop(llvm::AllocaInst* t, Value* total, const char* name, const std::function<void(Value*)>& body) {
  auto& B = e_.b;
  llvm::BasicBlock* head = llvm::BasicBlock::Create(e_.ctx, std::string(name) + ".head", fn_);
  llvm::BasicBlock* work = llvm::BasicBlock::Create(e_.ctx, std::string(name) + ".body", fn_);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(e_.ctx, std::string(name) + ".exit", fn_);
  B.CreateBr(head);
  B.SetInsertPoint(head);
  Value* now = B.CreateLoad(e_.i32(), t);
  B.CreateCondBr(B.CreateICmpSLT(now, total), work, done);
  B.SetInsertPoint(work);
  body(now);
  B.CreateBr(head);
  B.SetInsertPoint(done);
}

// ForwardPlan::persistent. The pipeline's step (stage and mbarrier phase) runs on across tiles.
// Every warp knows the CTA's first tile; the producer's first thread claims each next one once
// this tile's copies are issued, num_stages steps before the compute warps finish it: claimed when
// the tile starts, a CTA would hold one tile in reserve through a whole long tile while others ran
// dry (§23 of docs/perf-notes.md). The compute warps take the next index when their products have
// read this tile's Q, load that tile's Q, then store this tile's O.
void ForwardKernel::run_persistent(const std::function<void(KeyTile&)>& body) {
  auto& B = e_.b;
  Value* first = B.CreateAdd(tile::block_id(e_, 0),
                             B.CreateMul(tile::grid_dim(e_, 0), B.CreateAdd(tile::block_id(e_, 1),
                                                                            B.CreateMul(tile::grid_dim(e_, 1),
                                                                                        tile::block_id(e_, 2)))));
  Value* stride = B.CreateMul(tile::grid_dim(e_, 0), B.CreateMul(tile::grid_dim(e_, 1), tile::grid_dim(e_, 2)));
  Value* total = B.CreateMul(q_tiles_, B.CreateMul(arg(kParamGridHeads), arg(kParamGridBatch)));
  llvm::AllocaInst* steps = e_.var(e_.i32(), "steps", e_.c32(0));  // pipeline steps of the tiles before
  llvm::AllocaInst* tile = e_.var(e_.i32(), "tile", first);
  bars_ = B.CreateAdd(smem_, e_.c32(plan_.smem.barriers));
  Value* producer = split_warpgroups(/*with_q=*/false);
  auto walk = [&](Value* t) {
    enter_tile_at(t);
    step0_ = B.CreateLoad(e_.i32(), steps);
  };
  llvm::BasicBlock* prod = llvm::BasicBlock::Create(e_.ctx, "producer", fn_);
  llvm::BasicBlock* compute = llvm::BasicBlock::Create(e_.ctx, "compute", fn_);
  B.CreateCondBr(producer, prod, compute);

  B.SetInsertPoint(prod);
  tile::set_max_registers(e_, plan_.producer_registers, false);
  Value* lead = B.CreateICmpEQ(warp_, e_.c32(plan_.config.num_warps));  // the producer's first warp
  llvm::AllocaInst* round = e_.var(e_.i32(), "tile.round", e_.c32(0));  // hand-overs so far
  llvm::AllocaInst* claimed = e_.var(e_.i32(), "tile.claimed", e_.c32(0));
  tile_loop(tile, total, "tiles.produce", [&](Value* t) {
    walk(t);
    produce();
    B.CreateStore(B.CreateAdd(step0_, walk_->count()), steps);
    llvm::BasicBlock* publish = llvm::BasicBlock::Create(e_.ctx, "tile.publish", fn_);
    llvm::BasicBlock* take = llvm::BasicBlock::Create(e_.ctx, "tile.take", fn_);
    llvm::BasicBlock* next = llvm::BasicBlock::Create(e_.ctx, "tile.next", fn_);
    B.CreateCondBr(lead, publish, take);
    B.SetInsertPoint(publish);
    e_.when(B.CreateICmpEQ(lane_, e_.c32(0)), "tile.claim", [&] {
      Value* old = B.CreateAtomicRMW(llvm::AtomicRMWInst::Add, arg(kParamTileCounter), e_.c32(1), llvm::MaybeAlign(4),
                                     llvm::AtomicOrdering::Monotonic);
      B.CreateStore(B.CreateAdd(old, stride), claimed);
    });
    Value* mine = tile::shfl_idx(e_, B.CreateLoad(e_.i32(), claimed), 0);
    publish_tile(mine, B.CreateLoad(e_.i32(), round));
    B.CreateStore(mine, tile);
    B.CreateBr(next);
    B.SetInsertPoint(take);
    B.CreateStore(take_tile(B.CreateLoad(e_.i32(), round)), tile);
    B.CreateBr(next);
    B.SetInsertPoint(next);
    B.CreateStore(B.CreateAdd(B.CreateLoad(e_.i32(), round), e_.c32(1)), round);
  });
  tile::cp_async_wait(e_, 0);
  B.CreateRetVoid();

  B.SetInsertPoint(compute);
  tile::set_max_registers(e_, plan_.compute_registers, true);
  prepare_products();
  const int computing = plan_.compute_threads;
  auto load_q_of = [&](Value* t) {
    const TileAt at = tile_at(t);
    Value* off = slice_offset(e_, strides_[0], at.batch, e_.c32(0), at.head);
    load_q_rows(B.CreateGEP(B.getInt16Ty(), arg(kParamQ), off), B.CreateMul(at.q_tile, e_.c32(BM)));
  };
  e_.when(B.CreateICmpSLT(first, total), "first_q", [&] { load_q_of(first); });
  llvm::AllocaInst* taken = e_.var(e_.i32(), "tile.round", e_.c32(0));
  tile_loop(tile, total, "tiles", [&](Value* t) {
    walk(t);
    tile::cp_async_wait(e_, 0);  // this tile's Q
    tc_->publish_shared(e_);
    tile::sync_named(e_, kComputeBarrier, computing);
    init_state();
    for_each_key_tile(body);
    tile::sync_named(e_, kComputeBarrier, computing);  // every product that reads Q has been waited for
    Value* next = take_tile(B.CreateLoad(e_.i32(), taken));
    B.CreateStore(B.CreateAdd(B.CreateLoad(e_.i32(), taken), e_.c32(1)), taken);
    e_.when(B.CreateICmpSLT(next, total), "next_q", [&] { load_q_of(next); });
    store_output();
    B.CreateStore(B.CreateAdd(step0_, walk_->count()), steps);
    B.CreateStore(next, tile);
  });
  B.CreateRetVoid();
}

// The producer's walk: each step waits until its stage's last readers are done (the previous
// phase of its empty mbarrier), issues the K and V copies and has the full mbarrier arrived at
// when they land. It waits for its last copies before it exits. A listed walk (block map) keeps
// its own look-ahead entries: the producer and the compute warps each walk the list.
void ForwardKernel::produce() {
  auto& B = e_.b;
  e_.loop(e_.c32(0), walk_->count(), 1, "produce", [&](Value* j) {
    Value* stage = B.CreateURem(pipe_step(j), e_.c32(S));
    Value* round = B.CreateUDiv(pipe_step(j), e_.c32(S));
    e_.when(B.CreateICmpUGE(pipe_step(j), e_.c32(S)), "refill", [&] {
      tile::mbarrier_wait(e_, empty_bar(stage), B.CreateAnd(B.CreateAdd(round, e_.c32(1)), e_.c32(1)));
    });
    const TileWalk::Step step = walk_->begin_step(e_, j);
    issue_kv(j, walk_->entry(e_, j, 0, step.now), /*once=*/false);
    tile::cp_async_mbarrier_arrive(e_, full_bar(stage));
  });
}

}  // namespace flashjit::fwd

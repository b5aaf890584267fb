// The dK/dV kernel with a producer warpgroup (BackwardPass::producer): warp specialisation as
// FlashAttention-3's backward uses it (Shah et al. 2024, §3.1 and §3.3). The producer's 128
// threads issue every streamed tile's copies (Q, dO and their LSE and D) into the stage ring, and
// the stages are handed over through mbarriers (PTX ISA §9.7.13.15): "full" completes when a
// stage's copies have landed, "empty" when every compute warp is done with it. The two compute
// warpgroups then never meet at a CTA barrier per step, and the producer runs ahead across the
// group's query heads, so the next head's first tiles are in flight before this head's walk ends.
#include "compiler/tile/copy.hpp"
#include "compiler/tile/gpu.hpp"
#include "compiler/tile/mbarrier.hpp"
#include "compiler/tile/mma.hpp"
#include "compiler/tile/wgmma.hpp"
#include "templates/bwd/backward_kernel.hpp"

namespace flashjit::bwd {

// Thread 0 initialises the mbarriers; after the CTA barrier (which also publishes the resident K
// and V every compute thread copied) the producer leaves for its walk and returns; the compute
// warpgroups go on with the registers it gave up (setmaxnreg, PTX ISA §9.7.17.1).
void BackwardKernel::start_producer(Value* first_head) {
  auto& B = e_.b;
  bars_ = B.CreateAdd(smem_, e_.c32(P_.barriers));
  e_.when(B.CreateICmpEQ(tid_, e_.c32(0)), "init_bars", [&] {
    for (int s = 0; s < P_.stages; ++s) {
      tile::mbarrier_init(e_, full_bar(e_.c32(s)), 128);                  // one cp.async arrival per producer thread
      tile::mbarrier_init(e_, empty_bar(e_.c32(s)), P_.compute_threads);  // one per compute thread
    }
  });
  tile::cp_async_wait(e_, 0);
  tile::fence_proxy_async(e_);  // the resident tiles, for the products' wgmma
  tile::sync_threads(e_);
  steps_ = e_.var(e_.i32(), "steps", e_.c32(0));
  llvm::BasicBlock* prod = llvm::BasicBlock::Create(e_.ctx, "producer", fn_);
  llvm::BasicBlock* compute = llvm::BasicBlock::Create(e_.ctx, "compute", fn_);
  B.CreateCondBr(B.CreateICmpUGE(warp_, e_.c32(P_.warps)), prod, compute);
  B.SetInsertPoint(prod);
  tile::set_max_registers(e_, P_.producer_registers, false);
  for_each_head(first_head, [&] { produce(); });
  tile::cp_async_wait(e_, 0);
  B.CreateRetVoid();
  B.SetInsertPoint(compute);
  tile::set_max_registers(e_, P_.compute_registers, true);
}

// Step j waits until the stage's last readers are done (the previous phase of its empty
// mbarrier), issues the copies and has the full mbarrier arrived at when they land. A listed walk
// (block map) keeps its own look-ahead entries: the producer and the compute warps each walk it.
void BackwardKernel::produce() {
  auto& B = e_.b;
  const int S = P_.stages;
  e_.loop(e_.c32(0), walk_->count(), 1, "produce", [&](Value* j) {
    Value* step = pipe_step(j);
    Value* stage = B.CreateURem(step, e_.c32(S));
    Value* round = B.CreateUDiv(step, e_.c32(S));
    e_.when(B.CreateICmpUGE(step, e_.c32(S)), "refill",
            [&] { tile::mbarrier_wait(e_, empty_bar(stage), B.CreateAnd(B.CreateAdd(round, e_.c32(1)), e_.c32(1))); });
    const TileWalk::Step now = walk_->begin_step(e_, j);
    issue(j, walk_->entry(e_, j, 0, now.now), /*once=*/false);
    tile::cp_async_mbarrier_arrive(e_, full_bar(stage));
  });
}

// Step j waits for its stage's full mbarrier (phase step / S) and frees the stage once its
// products have been waited for, which tile_step does before it returns. Every compute thread
// arrives: each has read the stage's LSE and D with its own loads, which one lane's release would
// not order before the producer's next copies into the stage.
void BackwardKernel::consume() {
  auto& B = e_.b;
  const int S = P_.stages;
  e_.loop(e_.c32(0), walk_->count(), 1, "tiles", [&](Value* j) {
    Value* step = pipe_step(j);
    Value* stage = B.CreateURem(step, e_.c32(S));
    const TileWalk::Step now = walk_->begin_step(e_, j);
    tile::mbarrier_wait(e_, full_bar(stage), B.CreateAnd(B.CreateUDiv(step, e_.c32(S)), e_.c32(1)));
    tc_a_->publish_shared(e_);
    tile_step(j, walk_->entry(e_, j, 0, now.now));
    tile::mbarrier_arrive(e_, empty_bar(stage));
  });
}

}  // namespace flashjit::bwd

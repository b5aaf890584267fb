// The forward's loads by the TMA unit (ForwardPlan::tma, PTX ISA "cp.async.bulk.tensor"): one
// instruction per 64-column panel of a Q, K or V tile, its bytes counted on an mbarrier, through the
// tensor maps the kernel takes as its last parameters. The producer warpgroup issues them in
// forward_producer.cpp; here also the CTA-wide walk, whose first thread issues them.
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "compiler/tile/bulk.hpp"
#include "compiler/tile/mbarrier.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/fwd/forward_kernel.hpp"

namespace flashjit::fwd {

// ForwardPlan::tma without a producer: thread 0 initialises the stages' mbarriers and Q's, then
// issues Q and the first num_stages K/V tiles; the CTA waits for Q. The stages' "empty" mbarriers
// take one arrival per warp (tma_key_tiles).
void ForwardKernel::load_q_and_first_kv_tiles_by_tma() {
  auto& B = e_.b;
  bars_ = B.CreateAdd(smem_, e_.c32(plan_.smem.barriers));
  Value* q_full = B.CreateAdd(bars_, e_.c32(16 * S));
  address_tensor_maps();
  Value* lead = B.CreateICmpEQ(tid_, e_.c32(0));
  e_.when(lead, "init_bars", [&] {
    for (int s = 0; s < S; ++s) {
      tile::mbarrier_init(e_, full_bar(e_.c32(s)), 1);
      tile::mbarrier_init(e_, empty_bar(e_.c32(s)), plan_.config.num_warps);
    }
    tile::mbarrier_init(e_, q_full, 1);
  });
  start_products();  // the initialisations, fenced for the async proxy and published by a CTA barrier
  e_.when(lead, "prologue", [&] {
    tile::mbarrier_arrive_expect_tx(e_, q_full, plan_.smem.q_bytes);
    load_by_tma(kMapQ, q_smem_, spec_.head_dim_qk, q_start_, head_, q_full);
    for (int s = 0; s < S; ++s)
      e_.when(B.CreateICmpSLT(e_.c32(s), walk_->count()), "prologue.kv",
              [&] { load_kv_by_tma(e_.c32(s), walk_->entry(e_, e_.c32(0), s)); });
  });
  tile::mbarrier_wait(e_, q_full, e_.c32(0));
}

void ForwardKernel::address_tensor_maps() {
  for (int m = 0; m < kMapCount; ++m)
    maps_[m] = tile::tensor_map_address(e_, param_symbol(fn_, fn_->arg_size() - plan_.tensor_maps() + m));
}

// Step j's K and V tiles into its stage, their bytes expected on the stage's full mbarrier. One
// thread issues them.
void ForwardKernel::load_kv_by_tma(Value* j, Value* entry) {
  auto& B = e_.b;
  Value* stage = stage_of(j);
  Value* row = B.CreateMul(walk_->tile(e_, j, entry), e_.c32(BN));
  Value* full = full_bar(stage);
  tile::mbarrier_arrive_expect_tx(e_, full, plan_.smem.k_stage + plan_.smem.v_stage);
  load_by_tma(kMapK, stage_tile(plan_.smem.k, plan_.smem.k_stage, stage), spec_.head_dim_qk, row, head_kv_, full);
  load_by_tma(kMapV, stage_tile(plan_.smem.v, plan_.smem.v_stage, stage), spec_.head_dim_v, row, head_kv_, full);
}

void ForwardKernel::load_by_tma(int map, const SmemTile& dst, int d, Value* row, Value* head, Value* bar) {
  auto& B = e_.b;
  for (int p = 0; p * kTensorMapPanel < d; ++p)
    tile::tensor_load_4d(e_, B.CreateAdd(dst.base, e_.c32(128 * dst.rows * p)), maps_[map],
                         {e_.c32(p * kTensorMapPanel), row, head, batch_}, bar);
}

// The CTA-wide walk: thread 0 refills the stage step j − 1 read, once every warp has freed it, with
// step j + S − 1's tiles; every warp waits for step j's stage and frees it after body().
void ForwardKernel::tma_key_tiles(const std::function<void(KeyTile&)>& body) {
  auto& B = e_.b;
  e_.loop(e_.c32(0), walk_->count(), 1, "kv", [&](Value* j) {
    TileWalk::Step step = walk_->begin_step(e_, j);
    Value* ahead = B.CreateAdd(j, e_.c32(S - 1));
    Value* refill = B.CreateAnd(B.CreateICmpEQ(tid_, e_.c32(0)),
                                B.CreateAnd(B.CreateICmpUGE(j, e_.c32(1)), B.CreateICmpSLT(ahead, walk_->count())));
    e_.when(refill, "refill", [&] {
      Value* prev = B.CreateSub(j, e_.c32(1));
      tile::mbarrier_wait(e_, empty_bar(stage_of(prev)), parity_of(prev));
      load_kv_by_tma(ahead, walk_->entry(e_, j, S - 1, step.last));
    });
    // A warpgroup outside the tile (ForwardPlan::wg_key_ranges) still waits for its stage before
    // freeing it: the refill must not start while this stage's own loads are in flight.
    tile::mbarrier_wait(e_, full_bar(stage_of(j)), parity_of(j));
    KeyTile t = key_tile(j, step.now);
    if (plan_.wg_key_ranges) {
      Value* tile = walk_->tile(e_, j, walk_->entry(e_, j, 0, step.now));
      Value* mine = B.CreateAnd(B.CreateICmpSGE(tile, wg_first_), B.CreateICmpSLT(tile, wg_end_));
      // Through vote.sync.all, whose result ptxas knows is the same in every lane: a branch on a
      // value it cannot prove warp-uniform makes it assemble the body as divergent code (4.5 times
      // the R2URs, WARPSYNC.COLLECTIVE around the row shuffles), 3–4.5% slower than no skip at all
      // (docs/perf-notes.md §63).
      mine = B.CreateCall(llvm::Intrinsic::getDeclaration(fn_->getParent(), llvm::Intrinsic::nvvm_vote_all_sync),
                          {e_.c32(-1), mine});
      e_.when(mine, "wg.tile", [&] { body(t); });
    } else {
      body(t);
    }
    release(empty_bar(stage_of(j)));
  });
}

}  // namespace flashjit::fwd

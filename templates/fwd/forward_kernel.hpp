// The forward template's kernel class (templates/fwd/forward.cpp has the algorithm; the epilogue
// that stores O and the LSE is templates/fwd/forward_store.cpp). Private to templates/fwd.
#pragma once

#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <memory>

#include "compiler/tile/copy.hpp"
#include "compiler/tile/softmax.hpp"
#include "compiler/tile/tensor_core.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/common/kernel_args.hpp"
#include "templates/common/kv_bounds.hpp"
#include "templates/common/tile_walk.hpp"
#include "templates/fwd/plan.hpp"

namespace flashjit::fwd {

using llvm::Value;
using tile::RegTile;
using tile::SmemTile;

// Element offset of [batch, seq, head] in a tensor from its three strides.
inline Value* slice_offset(tile::Emitter& e, Value* strides[3], Value* b, Value* s, Value* h) {
  auto& B = e.b;
  Value* off = B.CreateMul(B.CreateZExt(b, e.i64()), strides[0]);
  off = B.CreateAdd(off, B.CreateMul(B.CreateSExt(s, e.i64()), strides[1]));
  return B.CreateAdd(off, B.CreateMul(B.CreateZExt(h, e.i64()), strides[2]));
}

// One step of the walk over key tiles: tile `j` of the walk, in pipeline stage j % num_stages.
struct KeyTile {
  Value* j = nullptr;
  Value* n0 = nullptr;           // its first key
  SmemTile k{nullptr, 0}, v{nullptr, 0};
  Value* entry = nullptr;        // its block-map list entry (null without a list)
  Value* last_q = nullptr;       // seq_q − 1 and seq_kv − 1: expressions read clamped positions
  Value* last_kv = nullptr;
  Value* stage = nullptr;   // ForwardPlan::kv_bars walks: the stage and its phase's parity
  Value* parity = nullptr;  // (null in other walks)
};

class ForwardKernel {
 public:
  ForwardKernel(llvm::Module& module, const ForwardPlan& plan, const std::string& entry);
  llvm::Function* function() const { return fn_; }

  void load_q_and_first_kv_tiles();
  void prepare_products();
  void init_state();
  void for_each_key_tile(const std::function<void(KeyTile&)>& body);
  // ForwardPlan::rotated: the same steps, each P·V product issued together with the next S.
  void rotated_walk();
  // S = Q Kᵀ, waited for; with ForwardPlan::kv_bars it then frees the K stage.
  RegTile scores(const KeyTile& t);
  void modify_scores(RegTile& s, KeyTile& t);
  void mask_scores(RegTile& s, const KeyTile& t);
  void softmax_step(RegTile& s) { tile::online_softmax(e_, s, multiplier_, softmax_, o_, plan_.grow_at); }
  // O += P V; with ForwardPlan::kv_bars it first waits for the V stage.
  void accumulate_output(const RegTile& p, const KeyTile& t);
  void store_output();
  void finish() { e_.b.CreateRetVoid(); }
  // ForwardPlan::persistent: the whole kernel, `body` run on each key tile of each tile it walks.
  void run_persistent(const std::function<void(KeyTile&)>& body);

 private:
  // Packed row `row` of O (a query row, or with GQA packing a (query, head) pair) from `o_base`.
  Value* o_row(Value* o_base, Value* row);
  Value* staged_rows();
  // The lane, rebuilt where the epilogue uses it: what follows from it stays in the tile loop
  // instead of living across the key walk.
  Value* epilogue_lane();
  void stage_matrices(size_t mt, Value* inv_g, Value* inv_g8);
  void store_staged(Value* o_base);
  void store_partial(size_t mt, int r, Value* row_index, Value* inv, const std::function<Value*()>& lse);
  void find_key_tiles();
  Value* tensor_base(int param, int t, Value* h);
  void enter_tile(Value* q_tile, Value* head, Value* head_kv, Value* heads_q, Value* batches);
  struct TileAt {
    Value *q_tile, *head, *batch;
  };
  TileAt tile_at(Value* t);
  void enter_tile_at(Value* t);
  Value* split_warpgroups();
  // Persistent walks: the claimed tile's hand-over, the Q ring and the loop over a CTA's tiles
  // (forward_producer.cpp).
  enum WalkBarrier { kSlotFull, kSlotEmpty, kQFull, kQEmpty };
  Value* walk_bar(int kind, int b);
  Value* walk_bar(int kind, Value* b);
  Value* tile_slot(Value* b);
  void publish_tile(Value* t, Value* round);
  Value* take_tile(Value* round);
  SmemTile q_buffer(Value* b);
  void tile_loop(llvm::AllocaInst* t, const std::function<Value*()>& total, const char* name,
                 const std::function<void(Value*)>& body);
  // Step j of this tile's walk as a step of the pipeline, which a persistent CTA runs on across tiles.
  Value* pipe_step(Value* j) { return step0_ ? e_.b.CreateAdd(step0_, j) : j; }
  // Step j's stage of the K/V ring, and the parity of the ring's phase it is in.
  Value* stage_of(Value* j) { return e_.b.CreateURem(pipe_step(j), e_.c32(S)); }
  Value* parity_of(Value* j) { return e_.b.CreateAnd(e_.b.CreateUDiv(pipe_step(j), e_.c32(S)), e_.c32(1)); }
  // Lane 0 of the warp arrives on mbarrier `bar`: the warp is done with what it guards.
  void release(Value* bar);
  // ForwardPlan::pingpong: wait for this warpgroup's turn to issue a product, and hand the turn to
  // the other warpgroup once it is issued.
  void turn_wait();
  void turn_pass();
  // Waits for a stage's V tile (its own mbarrier, ForwardPlan::kv_bars); cp.async copies, which
  // write through the generic proxy, are then published to the async proxy wgmma reads.
  void wait_v(Value* stage, Value* parity);
  void load_q();
  // ForwardPlan::tma without a producer (forward_tma.cpp).
  void load_q_and_first_kv_tiles_by_tma();
  void load_kv_by_tma(Value* j, Value* entry);
  void tma_key_tiles(const std::function<void(KeyTile&)>& body);
  void load_q_rows(const SmemTile& dst, Value* q_base, Value* q_start, int threads, Value* tid);
  void start_products();
  void produce();
  // ForwardPlan::tma: the `rows`-row tile of tensor map `map` at (row, head) of this tile's batch
  // into `dst`, one box per 64-column panel of `d` columns, counted on `bar`. One thread issues it.
  // The boxes fill the buffer whole (zeros past the tensor's edge): the bytes `bar` expects are the
  // buffer's (ForwardSmem::q_bytes, k_stage, v_stage).
  void load_by_tma(int map, const SmemTile& dst, int d, Value* row, Value* head, Value* bar);
  // ForwardPlan::tma: maps_ from the kernel's last parameters, in the thread that loads by them.
  void address_tensor_maps();
  // Stage `stage`'s "full" and "empty" mbarriers (ForwardPlan::producer); with
  // ForwardPlan::kv_bars those are K's, and V has its own pair.
  Value* full_bar(Value* stage) { return e_.b.CreateAdd(bars_, e_.b.CreateMul(stage, e_.c32(8))); }
  Value* empty_bar(Value* stage) { return e_.b.CreateAdd(full_bar(stage), e_.c32(8 * S)); }
  Value* v_full_bar(Value* stage) { return e_.b.CreateAdd(full_bar(stage), e_.c32(16 * S)); }
  Value* v_empty_bar(Value* stage) { return e_.b.CreateAdd(full_bar(stage), e_.c32(24 * S)); }
  // `parts`: 1 the K tile, 2 the V tile, 3 both.
  void issue_kv(Value* j, Value* entry, bool once, bool ahead = false, int parts = 3);
  void keep_pages_ahead(Value* j);
  tile::GlobalRows kv_rows(Value* j, Value* entry, int t);
  // The K or V tile of pipeline stage `stage` (its region's offset and stage size in bytes).
  SmemTile stage_tile(int region, int stage_bytes, Value* stage);
  // Step j of the walk (`entry`: its block-map list entry, null without a list).
  KeyTile key_tile(Value* j, Value* entry);
  Value* row_of(int mt, int i);
  // GQA packing: packed row r is query position r / G of query head head_ + r % G.
  Value* query_of(Value* row) { return G > 1 ? e_.b.CreateUDiv(row, e_.c32(G)) : row; }
  Value* head_of(Value* row) { return G > 1 ? e_.b.CreateAdd(head_, e_.b.CreateURem(row, e_.c32(G))) : head_; }
  Value* key_of(const KeyTile& t, int nt, int i);
  Value* clamp(Value* x, Value* hi) { return e_.b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, hi); }
  Value* arg(int i) const { return fn_->getArg(i); }

  const ForwardPlan& plan_;
  const AttentionSpec& spec_;
  llvm::Function* fn_;
  tile::Emitter e_;
  const int BM, BN, S, NT, OT;  // tile rows, keys, stages; 8-column n-tiles of S and of O
  const int G;                  // query heads packed per CTA (Target::pack_gqa), 1: none
  const bool SPLIT;             // split-KV (Target::split_kv): one run of the key tiles, partials out
  const bool VARLEN;            // packed sequences (Target::varlen): lengths and offsets from cu_seqlens
  const bool PAGED;             // paged K/V (Target::paged): rows through the block table
  const bool PRODUCER;          // ForwardPlan::producer: K/V loads by a producer warpgroup
  const bool PERSISTENT;        // ForwardPlan::persistent: the CTA walks tiles
  const bool Q_AHEAD;           // persistent, two Q buffers or stage_in_v: the producer loads each tile's Q
  const bool ROTATED;           // ForwardPlan::rotated: P·V of step j − 1 issued with S of step j
  const bool KV_BARS;           // ForwardPlan::kv_bars: K and V stages each have their own mbarriers
  const bool TMA;               // ForwardPlan::tma: the producer's first thread loads by tensor map
  // One Q buffer: the compute warpgroups' named barrier orders their Q copies and products.
  static constexpr int kComputeBarrier = 3;
  // ForwardPlan::pingpong: warpgroup g waits for its turn at kTurnBarrier + g.
  static constexpr int kTurnBarrier = 4;
  Value* strides_[4][3];
  Value *seq_q_, *seq_kv_, *scale_log2_;
  Value* rows_;                  // packed rows: seq_q · G
  Value* q_tiles_ = nullptr;     // persistent: query tiles per head
  Value* step0_ = nullptr;       // persistent: pipeline steps of the tiles walked before this one
  Value* q0_ = nullptr;          // varlen: this sequence's first token in q/o and in k/v
  Value* kv0_ = nullptr;
  Value* page_table_ = nullptr;  // paged: this sequence's row of the block table
  std::vector<llvm::AllocaInst*> pages_ahead_;  // paged, one entry per page: the next issue's pages
  Value *q_first_, *q_final_;    // the query positions of this CTA's first and last rows
  Value* bars_ = nullptr;        // producer: the stage mbarriers' shared address
  Value* maps_[kMapCount] = {};  // ForwardPlan::tma, in the producer: the tensor maps' addresses
  Value *tid_, *warp_, *lane_, *g_, *t4_, *q_tile_, *split_, *head_, *batch_, *head_kv_;
  Value *q_base_, *k_base_, *v_base_, *smem_, *q_start_, *q_last_;
  SmemTile q_smem_{nullptr, 0};
  // stage_in_v: where this tile's O is staged, and the mbarrier that frees it once read out.
  Value* o_stage_ = nullptr;
  Value* o_free_ = nullptr;
  ExprInputs ex_;
  KvBounds bounds_{};
  // ForwardPlan::wg_key_ranges: this warpgroup's own rows' bounds and key tiles [first, end).
  KvBounds wg_bounds_{};
  Value *wg_first_ = nullptr, *wg_end_ = nullptr;
  std::unique_ptr<TileWalk> walk_;
  std::unique_ptr<tile::TensorCore> tc_;
  Value* multiplier_ = nullptr;  // folds scale·log2 e into the softmax; 1 after a score modifier
  tile::SoftmaxRows softmax_;
  tile::TileVars o_, s_vars_;
};

}  // namespace flashjit::fwd

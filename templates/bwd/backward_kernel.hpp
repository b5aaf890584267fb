// The backward's main kernels (templates/bwd/backward.cpp): one class emits the dK/dV kernel
// (keys side) and the dQ kernel (queries side), sharing the recomputation of P and dS.
#pragma once

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <functional>
#include <memory>

#include "compiler/tile/tensor_core.hpp"
#include "templates/bwd/dq_sum.hpp"
#include "templates/bwd/plan.hpp"
#include "templates/common/backward_abi.hpp"
#include "templates/common/kernel_args.hpp"
#include "templates/common/kv_bounds.hpp"
#include "templates/common/tile_walk.hpp"

namespace flashjit::bwd {

using llvm::Value;
using tile::RegTile;
using tile::SmemTile;

// Which sequence the CTA's rows belong to.
enum class Side { keys, queries };

// What a kernel accumulates: dK and dV (or one of them when the plan splits), or dQ; on the keys
// side dq means dQ added into the workspace (BackwardPlan::fused_dq).
struct Outputs {
  bool dk = false, dv = false, dq = false;
};

inline Value* slice_offset(tile::Emitter& e, Value* const strides[3], Value* b, Value* h) {
  auto& B = e.b;
  return B.CreateAdd(B.CreateMul(B.CreateZExt(b, e.i64()), strides[0]), B.CreateMul(B.CreateZExt(h, e.i64()), strides[2]));
}

class BackwardKernel {
 public:
  BackwardKernel(llvm::Module& module, const BackwardPlan& plan, Side side, Outputs out, const std::string& name);
  void run();

 private:
  // Per query head (the dK/dV kernel loops over its group): pointers, tile range, walk.
  void start_head(Value* head);
  void walk_tiles();
  void issue(Value* j, Value* entry, bool once);
  // BackwardPass::producer (templates/bwd/backward_producer.cpp): the mbarriers initialised and
  // the warpgroups split, the producer's walk over every head of the group, the compute warps' walk.
  void start_producer(Value* first_head);
  void produce();
  void consume();
  Value* full_bar(Value* stage) { return e_.b.CreateAdd(bars_, e_.b.CreateMul(stage, e_.c32(8))); }
  Value* empty_bar(Value* stage) { return e_.b.CreateAdd(full_bar(stage), e_.c32(8 * P_.stages)); }
  // Step j of this head's walk counted over the heads walked before (the stage ring runs on).
  Value* pipe_step(Value* j) { return step0_ ? e_.b.CreateAdd(step0_, j) : j; }
  // Walks each query head of the group in order: start_head, then `walk`; the pipeline steps carried.
  void for_each_head(Value* first_head, const std::function<void()>& walk);
  void tile_step(Value* j, Value* entry);
  // BackwardPlan::warpgroup_split (templates/bwd/backward_roles.cpp): the kernel's tail after the
  // resident tiles, once per warpgroup with out_ naming its output, and each one's step.
  void run_roles(const std::function<void()>& walk_and_store);
  void step_dv(Value* first, Value* entry, const SmemTile& str_qk, const SmemTile& str_v);
  void step_dk(const SmemTile& str_qk, const SmemTile& str_v);
  Value* shared_p(int mt, int nt, int i);  // element (mt, nt, i) of this thread in plan.kv.p_share
  static constexpr int kPShared = 1;  // the named barrier of the hand-over (0 is the CTA's)
  // P of one streamed tile from its S (and the score's derivative at each element).
  RegTile probabilities(RegTile s, Value* first, Value* entry, RegTile* grad);
  void load_row_stats();
  Value* row_stat(bool delta, int mt, int nt, int i);
  // The keys side's dQ (templates/bwd/dq_sum.hpp): this head's inputs.
  DqSumInputs dq_sum() const { return {smem_, tid_, bwd(kBwdDqAccum), batch_head_, seq_q_, ds_buffer_}; }
  void store(const tile::TileVars& acc, Value* base, Value* const strides[3], Value* limit, int cols, Value* mult);

  Value* arg(int i) const { return fn_->getArg(unsigned(i)); }
  Value* bwd(int i) const { return backward_arg(fn_, *plan_.spec, i); }
  Value* clamp(Value* x, Value* hi) { return e_.b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, hi); }
  // The (query, key) of element (mt, nt, i) of a register tile whose columns start at `first`.
  Value* row_of(int mt, int i);
  Value* col_of(Value* first, int nt, int i);
  Value* query_of(Value* first, int mt, int nt, int i) { return side_ == Side::queries ? row_of(mt, i) : col_of(first, nt, i); }
  Value* key_of(Value* first, int mt, int nt, int i) { return side_ == Side::keys ? row_of(mt, i) : col_of(first, nt, i); }
  SmemTile stage_tile(int region, int stage_bytes, Value* stage) {
    auto& B = e_.b;
    return {B.CreateAdd(B.CreateAdd(smem_, e_.c32(region)), B.CreateMul(stage, e_.c32(stage_bytes))), P_.cols};
  }

  const BackwardPlan& plan_;
  const BackwardPass& P_;
  const AttentionSpec& spec_;
  Side side_;
  Outputs out_;
  llvm::Function* fn_;
  tile::Emitter e_;
  const int NT;  // 8-column n-tiles of S
  Value* strides_[8][3];  // q, k, v, o, d_o, dq, dk, dv
  Value *seq_q_, *seq_kv_, *seq_rows_, *seq_cols_, *scale_log2_, *group_;
  Value *tid_, *warp_, *lane_, *g_, *t4_, *tile_, *head_, *batch_, *head_kv_, *heads_q_;
  Value *smem_, *row0_, *row_last_;
  // Streamed tiles (Q and dO, or K and V) of the current head.
  Value *str_qk_base_ = nullptr, *str_v_base_ = nullptr, *lse_row_ = nullptr, *delta_row_ = nullptr;
  ExprInputs ex_;
  KvBounds bounds_{};
  std::unique_ptr<TileWalk> walk_;
  std::unique_ptr<tile::TensorCore> tc_a_, tc_b_;  // A = the resident d_qk tile, the resident d_v tile
  tile::TileVars acc_a_, acc_b_;  // keys: dV (with tc_a), dK (with tc_b); queries: dQ (with tc_a)
  tile::TileVars p_vars_;
  // Per thread: LSE·log2 e (+inf for a row with no visible key) and D of each query it holds.
  std::vector<llvm::AllocaInst*> lse_vars_, delta_vars_;
  Value* stats_ = nullptr;  // the dK/dV kernel: this stage's LSE and D in shared memory
  Value* batch_head_ = nullptr;  // batch · heads_q + the query head start_head was called for
  const bool PRODUCER;           // BackwardPass::producer (the keys side)
  Value* bars_ = nullptr;        // producer: the stage mbarriers' shared address
  Value* step0_ = nullptr;       // producer: pipeline steps of the heads walked before this one
  llvm::AllocaInst* steps_ = nullptr;
  Value* ds_buffer_ = nullptr;  // this step's dSᵀ buffer (BackwardPass::ds_buffers > 1)
  Value* p_buffer_ = nullptr;   // byte offset of this step's P buffer (BackwardPass::p_buffers() > 1)
};

}  // namespace flashjit::bwd

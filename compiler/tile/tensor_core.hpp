// The tensor-core products of an attention kernel behind one interface, so a kernel template says
// what it multiplies, not with which instruction: S = A·Bᵀ (A the CTA's rows, B a tile of keys,
// both K-major in shared memory) and O += P·V (P a register tile of probabilities, V in shared
// memory). wgmma (sm_90a, PTX ISA §9.7.15) and mma.sync m16n8k16 (sm_80+, §9.7.13) both leave every
// thread the m16n8 C layout of compiler/tile/register_tile.hpp, so the code around the products is
// the same for both.
#pragma once

#include <memory>

#include "compiler/tile/register_tile.hpp"
#include "compiler/tile/smem_tile.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit::tile {

struct MmaShape {
  DType dtype = DType::bf16;
  int rows = 0;            // rows of A in the CTA (block_m)
  int cols = 0;            // rows of B per tile (block_n): S is rows × cols
  int k_steps = 0;         // 16-wide k-steps of S = A·Bᵀ (ceil(d_qk / 16))
  int out_tiles = 0;       // 8-column n-tiles of O (ceil(d_v / 8))
  int m_tiles = 1;         // 16-row m-tiles per warp: 1 or 2 (mma.sync only)
  bool a_in_registers = false;  // mma.sync: load A's fragments once, before the loop
  // wgmma, O 128 or 256 columns wide: P·V as one m64n128k16 or m64n256k16 per 16 keys, across
  // V's 64-column panels (the descriptor's leading byte offset steps between them), instead of
  // one m64n64k16 per panel; cuDNN's d = 128 and d = 256 kernels issue the same. Measured at
  // d = 256 flat unmasked and +2–4% on the 64-key masked kernels at 4k and 16k (docs/perf-notes.md
  // §38); at d = 128 alone flat (§35, §51), with the warpgroups' turns +0.1–2.4% on the masks (§51).
  bool whole_pv = false;
  // wgmma: each product's instructions from one asm statement (WgmmaSequence: less LLVM time).
  bool one_statement = false;
};

class TensorCore {
 public:
  virtual ~TensorCore() = default;
  // Per-thread fragment addresses (and, when A stays in registers, its fragments): emitted once,
  // before the loop, with `a` (the CTA's rows) already in shared memory.
  virtual void prepare(Emitter& e, const SmemTile& a) = 0;
  // The first of this warp's rows within the CTA's block (valid after prepare).
  virtual llvm::Value* warp_row0() const = 0;
  // Makes what cp.async wrote to shared memory visible to the products' reads.
  virtual void publish_shared(Emitter& e) const = 0;
  // S = A·Bᵀ for one tile of B (rows × cols, fp32).
  virtual RegTile mma_abt(Emitter& e, const SmemTile& b) = 0;
  // S = A·Bᵀ issued and not waited for, so that independent work (another product, the softmax of
  // a product already waited for) runs under it (FlashAttention-3 §3.2, intra-warpgroup overlap):
  // its values are valid only after wait(). Where products are synchronous, mma_abt.
  virtual RegTile mma_abt_async(Emitter& e, const SmemTile& b) { return mma_abt(e, b); }
  // Waits until at most `pending` issued products are still in flight, and orders every later use
  // of `t` (a tile mma_abt_async returned) after that; `also` (the registers of another product in
  // flight, e.g. the accumulators of a P·V issued before) are threaded through the wait too, so
  // that their uses take the values after it.
  virtual void wait(Emitter& /*e*/, RegTile& /*t*/, int /*pending*/, std::vector<llvm::Value*>* /*also*/ = nullptr) {}
  // acc += P·V: P (rows × cols, fp32, rounded to the dtype here) times V (cols × out, MN-major).
  virtual void mma_pv(Emitter& e, RegTile& acc, const RegTile& p, const SmemTile& v) = 0;
  // wgmma only (ForwardPlan::rotated): P rounded to the dtype and packed as the P·V product's A
  // registers, and acc += P·V issued from them and not waited for (wait(acc, ·) before acc's use).
  virtual std::vector<llvm::Value*> pack_p(Emitter& e, const RegTile& p);
  virtual void mma_pv_async(Emitter& e, RegTile& acc, std::vector<llvm::Value*> p_regs, const SmemTile& v);
};

// wgmma when `warpgroup`, else mma.sync. `warp` and `lane` are this thread's (%tid.x / 32, % 32).
std::unique_ptr<TensorCore> make_tensor_core(bool warpgroup, const MmaShape& shape, llvm::Value* warp,
                                             llvm::Value* lane);

}  // namespace flashjit::tile

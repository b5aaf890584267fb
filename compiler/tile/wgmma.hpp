// Warpgroup tensor-core primitives of sm_90a: wgmma.mma_async with shared-memory descriptors
// (PTX ISA §9.7.15). A warpgroup is 4 consecutive warps; it computes a 64 × n tile, warp w % 4
// owning rows 16·(w % 4) .. +15 in the same per-thread layout as mma.sync m16n8 (accumulator
// register 4·j + i: row lane/4 + 8·(i >> 1), column 8·j + 2·(lane % 4) + (i & 1)).
#pragma once

#include <vector>

#include "compiler/tile/emitter.hpp"
#include "compiler/tile/mma.hpp"
#include "compiler/tile/smem_tile.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit::tile {

// The 64-bit matrix descriptor of an operand in the 128-byte-swizzle canonical layout (PTX ISA
// §9.7.15.5.1.2): start address, leading and stride byte offsets (all >> 4), swizzle mode 1.
// K-major operands: lbo unused, sbo = 1024 (8 rows of 128 B). MN-major: lbo = the distance
// between 64-element panels along MN, sbo = 1024 (8 rows along K).
llvm::Value* smem_desc(Emitter& e, llvm::Value* addr, int lbo_bytes, int sbo_bytes);

// An A operand: a shared-memory descriptor (K-major) or four b32 registers per thread in the
// mma.sync m16n8k16 A layout (the warp's 16 rows).
struct WgmmaA {
  llvm::Value* desc = nullptr;
  Frag4 regs{};
  int desc_add = 0;  // bytes added to desc's start address inside the instruction's asm block
};

// acc (n/2 f32 per thread) += A (64 × 16) · B (16 × n); B by descriptor, MN-major when trans_b;
// A by descriptor is MN-major when trans_a (16-bit types only, PTX ISA §9.7.15.5.1). The *_add
// byte offsets (multiples of 16) are added to the descriptors inside the asm block, so one base
// descriptor serves every k-step: LLVM cannot hoist a register per k-step out of a loop.
// Without `accumulate`, acc = A · B (scale-d = 0; PTX ISA, wgmma.mma_async) and the incoming `acc`
// values are never read: pass wgmma_fresh(n), and no instruction writes them beforehand.
// Issued asynchronously: `acc`'s new values are only valid after wgmma_wait.
std::vector<llvm::Value*> wgmma(Emitter& e, DType dtype, int n, const std::vector<llvm::Value*>& acc, const WgmmaA& a,
                                llvm::Value* b_desc, bool trans_b, bool accumulate = true, bool trans_a = false,
                                int b_desc_add = 0);

// One wgmma of a sequence: acc[acc_at .. acc_at + n/2) += A · B, as wgmma() issues it.
struct WgmmaStep {
  int n = 0, acc_at = 0;
  WgmmaA a;
  llvm::Value* b_desc = nullptr;
  int b_desc_add = 0;
  bool trans_b = false, accumulate = true, trans_a = false;
};

// A product's wgmmas in order: each from its own asm statement as it is added, or with
// `one_statement` all from one at finish(). One statement costs LLVM less, because each step's
// statement returns the 64 accumulators as a struct that LLVM takes apart again (most of the
// optimised module's text, docs/perf-notes.md §57): 22–38% of the forward's LLVM time at d = 128
// and 256 (§68). For the forward's kernels ptxas makes the same instructions either way, and in
// the same order in all but two (§68). The backward keeps one statement per step: there every
// step's descriptors are live at the one statement, and its d = 128 kernel spilled (§57).
class WgmmaSequence {
 public:
  WgmmaSequence(Emitter& e, DType dtype, std::vector<llvm::Value*> acc, bool one_statement);
  void add(const WgmmaStep& step);
  std::vector<llvm::Value*> finish();  // the accumulators after every step (issued, not waited for)

 private:
  Emitter& e_;
  DType dtype_;
  std::vector<llvm::Value*> acc_;
  bool one_statement_;
  std::vector<WgmmaStep> steps_;
};

// acc (64 × n, fp32, fresh) = A·B with both operands MN-major in shared memory, k_steps 16-row
// k-steps: `a` stores Aᵀ (rows = K, the 64 columns of panel a_panel = M), `b` stores B (rows = K,
// columns b_col .. b_col + n − 1 = N, within one 64-column panel; b_col a multiple of 8). Fenced,
// committed and waited for here.
std::vector<llvm::Value*> wgmma_mn_major(Emitter& e, DType dtype, const SmemTile& a, int a_panel, const SmemTile& b,
                                         int b_col, int n, int k_steps);

// n/2 accumulator placeholders (undef) for a first wgmma without `accumulate`.
std::vector<llvm::Value*> wgmma_fresh(Emitter& e, int n);

// wgmma.fence: orders earlier register writes (accumulators, A registers) before the next wgmma;
// `vals` (those registers) are threaded through it so their producers stay above it.
void wgmma_fence(Emitter& e, std::vector<llvm::Value*>& vals);
// wgmma.fence with no registers to order (before a group whose operands are all in shared memory
// and whose accumulators start fresh); required before a warpgroup's first wgmma (PTX ISA,
// wgmma.fence).
void wgmma_fence(Emitter& e);
void wgmma_commit(Emitter& e);
// wgmma.wait_group `pending` (at most that many committed groups still in flight), threading
// `vals` through it so no use of them can move above the wait.
void wgmma_wait(Emitter& e, std::vector<llvm::Value*>& vals, int pending = 0);
// fence.proxy.async.shared::cta: this thread's generic-proxy writes to shared memory (cp.async,
// st.shared) become visible to the async proxy that wgmma reads through (PTX ISA §9.7.12.4).
void fence_proxy_async(Emitter& e);

}  // namespace flashjit::tile

// FlashAttention-2 on mma.sync (Dao 2023, Alg. 1; fragment layouts from PTX ISA §9.7.13.4.8).
// A CTA owns block_m = 16·num_warps query rows; warp w owns rows 16w..16w+15, so every softmax
// statistic stays inside one warp (rows g and g+8 of lane 4g..4g+3: quad shuffles only).
// K/V tiles of block_n keys stream through a num_stages-deep cp.async pipeline in swizzled shared
// memory; S = QKᵀ and O += PV run on m16n8k16 tensor-core tiles; P goes from the S accumulators
// straight into A fragments (the C and A layouts line up pairwise), never through memory. The
// online softmax works in the exp2 domain with the scale folded into one FFMA per score; rows
// whose keys are all masked keep m = −inf, and "use 0 as the max" keeps 2^(s − m) at 0 instead of
// NaN; the epilogue writes O = 0, LSE = −inf for them. The DSL mask decides the key tiles: its
// closed-form kv range (templates/kv_bounds.cpp) gives, per query tile, the tiles to visit —
// the rest are never loaded — and the tiles that need no mask code; in the others the mask
// expression runs per element. A score modifier runs on scale·qkᵀ before the softmax.
#include "templates/fwd/forward.hpp"

#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "compiler/lower_expr.hpp"
#include "compiler/tile/emitter.hpp"
#include "compiler/tile/gpu.hpp"
#include "compiler/tile/mma.hpp"
#include "compiler/tile/wgmma.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/common/kernel_args.hpp"
#include "templates/common/kv_bounds.hpp"

namespace flashjit {

namespace {

using tile::Acc4;
using tile::Emitter;
using tile::Frag4;
using llvm::Value;

// Element offset of [batch, seq, head] in a tensor from its three strides.
Value* slice_offset(Emitter& e, Value* strides[3], Value* b, Value* s, Value* h) {
  auto& B = e.b;
  Value* off = B.CreateMul(B.CreateZExt(b, e.i64()), strides[0]);
  off = B.CreateAdd(off, B.CreateMul(B.CreateSExt(s, e.i64()), strides[1]));
  return B.CreateAdd(off, B.CreateMul(B.CreateZExt(h, e.i64()), strides[2]));
}

// A shared-memory tile of `rows` rows of 16-bit elements, stored as panels of 64 columns
// (128 bytes per row, rows dense, panel after panel), with 16-byte chunk c of row r at chunk
// c ^ (r % 8) inside its 128-byte row. That is wgmma's 128-byte-swizzle canonical layout (PTX ISA
// §9.7.15.5.1, "Shared Memory Matrix Layout": 8-row × 128 B atoms, 1024-byte aligned), and the 8
// row addresses of one ldmatrix and the chunks of one cp.async quarter-warp hit distinct banks.
struct SmemTile {
  Value* base;  // i32 .shared address, 1024-byte aligned
  int rows;
  // Byte offset of 16-byte chunk `chunk` (of the whole row) of row `row`.
  Value* offset(Emitter& e, Value* row, Value* chunk) const {
    auto& B = e.b;
    Value* line = B.CreateAdd(B.CreateMul(B.CreateLShr(chunk, 3), e.c32(rows)), row);
    Value* swz = B.CreateXor(B.CreateAnd(chunk, e.c32(7)), B.CreateAnd(row, e.c32(7)));
    return B.CreateAdd(B.CreateShl(line, 7), B.CreateShl(swz, 4));
  }
};

// The addresses of one warp-wide fragment access, row = R + r and chunk = 2c + bit, with R (a
// multiple of 8) and c compile-time constants and r, bit per thread. R keeps r % 8, so the
// chunk's panel is c >> 2 and its swizzled position (2·(c & 3) + bit) ^ (r % 8): four per-thread
// byte offsets (by c & 3) plus the constant 128·R + 128·rows·(c >> 2), which goes into the
// instruction.
struct FragAddr {
  std::array<Value*, 4> off{};
  int rows = 0;
  FragAddr(Emitter& e, int rows_, Value* r, Value* bit) : rows(rows_) {
    for (int q = 0; q < 4; ++q) off[q] = SmemTile{nullptr, rows}.offset(e, r, e.b.CreateAdd(e.c32(2 * q), bit));
  }
  Value* reg(Emitter& e, Value* base, int c) const { return e.b.CreateAdd(base, off[c & 3]); }
  int imm(int R, int c) const { return 128 * R + 128 * rows * (c >> 2); }
};

// The whole CTA copies rows [row0, row0 + rows) of a [seq, d] slice into `dst` with cp.async.
// Rows at or past row_end and columns at or past d (up to the next multiple of 16, which the
// mma k-steps read) become zeros without touching global memory.
// `once`: a copy each CTA runs once (Q, the prologue's K/V) is emitted checked only: the
// unchecked twin would save a few instructions once and cost compile time every time.
void copy_tile(Emitter& e, const SmemTile& dst, Value* src, Value* row_stride, Value* row0, Value* row_end, int rows,
               int d, int threads, Value* tid, bool once) {
  auto& B = e.b;
  const int chunks = (d + 15) / 16 * 2;
  const int total = rows * chunks;
  if (threads % chunks != 0) {
    // A wave of `threads` does not cover whole rows: each copy finds its row and chunk anew.
    for (int first = 0; first < total; first += threads) {
      auto body = [&] {
        Value* idx = B.CreateAdd(tid, e.c32(first));
        Value* r = B.CreateUDiv(idx, e.c32(chunks));
        Value* c = B.CreateURem(idx, e.c32(chunks));
        Value* dst_addr = B.CreateAdd(dst.base, dst.offset(e, r, c));
        Value* row = B.CreateAdd(row0, r);
        Value* valid = B.CreateAnd(B.CreateICmpSLT(row, row_end), B.CreateICmpULT(c, e.c32(d / 8)));
        Value* safe_row = B.CreateSelect(valid, row, row0);
        Value* safe_col = B.CreateSelect(valid, B.CreateShl(c, 3), e.c32(0));
        Value* off = B.CreateAdd(B.CreateMul(B.CreateSExt(safe_row, e.i64()), row_stride), B.CreateZExt(safe_col, e.i64()));
        tile::cp_async_16(e, dst_addr, 0, B.CreateGEP(B.getInt16Ty(), src, off), valid);
      };
      if (first + threads <= total) body();
      else e.when(B.CreateICmpULT(B.CreateAdd(tid, e.c32(first)), e.c32(total)), "copy.tail", body);
    }
    return;
  }
  // A wave covers rp whole rows: a thread copies the same chunk c0 of rows r0 + i·rp in every
  // wave; its swizzle repeats every 8 rows, so one offset per distinct (i·rp) % 8 and a constant
  // per wave address every destination.
  const int rp = threads / chunks;
  Value* r0 = B.CreateUDiv(tid, e.c32(chunks));
  Value* c0 = B.CreateURem(tid, e.c32(chunks));
  std::array<Value*, 8> wave_off{};  // built here, before the branches below, so both may use them
  for (int wave = 0; wave * threads < total; ++wave)
    if (Value*& o = wave_off[wave * rp % 8]; !o) o = dst.offset(e, B.CreateAdd(r0, e.c32(wave * rp % 8)), c0);
  // Chunks past d (up to the k-step's 16 columns) are zeros; only d % 16 ≠ 0 has them.
  Value* col_ok = d % 16 ? B.CreateICmpULT(c0, e.c32(d / 8)) : nullptr;
  // The source steps by rp rows per wave (a chain of adds, so LLVM keeps no per-wave offsets).
  // `checked`: rows at or past row_end (and padding chunks) read nothing (src-size 0), from the
  // slice's first row.
  auto waves = [&](bool checked) {
    Value* row = B.CreateAdd(row0, r0);
    Value* off = B.CreateAdd(B.CreateMul(B.CreateSExt(row, e.i64()), row_stride), B.CreateZExt(B.CreateShl(c0, 3), e.i64()));
    Value* p = B.CreateGEP(B.getInt16Ty(), src, off);
    Value* step = B.CreateMul(row_stride, e.c64(rp));
    for (int wave = 0; wave * threads < total; ++wave) {
      if (wave) p = B.CreateGEP(B.getInt16Ty(), p, step);
      const int k = wave * rp % 8;
      Value* dst_addr = B.CreateAdd(dst.base, wave_off[k]);
      auto copy = [&] {
        if (!checked) return tile::cp_async_16(e, dst_addr, 128 * (wave * rp - k), p, B.getTrue());
        Value* valid = B.CreateICmpSLT(B.CreateAdd(row, e.c32(wave * rp)), row_end);
        if (col_ok) valid = B.CreateAnd(valid, col_ok);
        tile::cp_async_16(e, dst_addr, 128 * (wave * rp - k), B.CreateSelect(valid, p, src), valid);
      };
      // A last wave wider than the tile (small d or tiles, e.g. d=16 with 32 rows) is cut at it.
      if ((wave + 1) * threads <= total) copy();
      else e.when(B.CreateICmpULT(B.CreateAdd(tid, e.c32(wave * threads)), e.c32(total)), "copy.tail", copy);
    }
  };
  // Every tile but a sequence's last lies wholly inside the tensor: no bounds checks there. The
  // checked copy is the same chain with one compare and two selects per wave: about a third of
  // the per-copy address arithmetic above, and code size is most of a cold compile's time (issue 5).
  if (once || col_ok) return waves(true);
  Value* inside = B.CreateICmpSLE(B.CreateAdd(row0, e.c32(rows)), row_end);
  e.when(inside, "copy.inside", [&] { waves(false); });
  e.when(B.CreateNot(inside), "copy.edge", [&] { waves(true); });
}

Value* quad_max(Emitter& e, Value* x) {
  x = e.b.CreateMaxNum(x, tile::shfl_xor(e, x, 1));
  return e.b.CreateMaxNum(x, tile::shfl_xor(e, x, 2));
}

Value* quad_sum(Emitter& e, Value* x) {
  x = e.b.CreateFAdd(x, tile::shfl_xor(e, x, 1));
  return e.b.CreateFAdd(x, tile::shfl_xor(e, x, 2));
}

}  // namespace

llvm::Function* emit_attention_forward(llvm::Module& module, const ForwardPlan& plan, const std::string& entry) {
  llvm::Function* fn = declare_kernel(module, *plan.spec, {plan.threads, plan.min_ctas_per_sm}, plan.has_map(), entry);
  Emitter e(module, fn);
  auto& B = e.b;
  B.SetInsertPoint(llvm::BasicBlock::Create(e.ctx, "entry", fn));

  const int d_qk = plan.attention().head_dim_qk, d_v = plan.attention().head_dim_v;
  const int BM = plan.config.block_m, BN = plan.config.block_n, S = plan.config.num_stages;
  // Output n-tiles of 8 columns: pairs load with ldmatrix.x4, an odd last one with .x2.
  const int NT = BN / 8, OT = (d_v + 7) / 8;
  const DType dt = plan.attention().dtype;
  auto arg = [&](int i) -> Value* { return fn->getArg(i); };
  Value* strides[4][3];
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 3; ++i) strides[t][i] = arg(kParamStrides + 3 * t + i);
  Value* seq_q = arg(kParamSeqQ);
  Value* seq_kv = arg(kParamSeqKv);
  Value* scale_log2 = arg(kParamScaleLog2);

  Value* tid = tile::thread_id(e);
  Value* warp = B.CreateLShr(tid, 5);
  Value* lane = B.CreateAnd(tid, e.c32(31));
  Value* g = B.CreateLShr(lane, 2);   // fragment row (and row + 8)
  Value* t4 = B.CreateAnd(lane, e.c32(3));  // fragment column pair
  Value* q_tile = tile::block_id(e, 0);
  Value* head = tile::block_id(e, 1);
  Value* batch = tile::block_id(e, 2);
  Value* head_kv = B.CreateUDiv(head, arg(kParamGroup));  // GQA/MQA: query heads share a K/V head
  Value* zero = e.c32(0);

  auto base = [&](int param, int t, Value* h) {
    return B.CreateGEP(B.getInt16Ty(), arg(param), slice_offset(e, strides[t], batch, zero, h));
  };
  Value* q_base = base(kParamQ, 0, head);
  Value* k_base = base(kParamK, 1, head_kv);
  Value* v_base = base(kParamV, 2, head_kv);

  Value* smem = tile::shared_u32(e, tile::shared_base(e));
  if (plan.wgmma) smem = B.CreateAnd(B.CreateAdd(smem, e.c32(kWgmmaAlignSlack - 1)), e.c32(-kWgmmaAlignSlack));
  auto region = [&](int offset) { return B.CreateAdd(smem, e.c32(offset)); };
  SmemTile q_tile_smem{region(plan.smem.q), BM};
  auto k_stage = [&](Value* s) {
    return SmemTile{B.CreateAdd(region(plan.smem.k), B.CreateMul(s, e.c32(plan.smem.k_stage))), BN};
  };
  auto v_stage = [&](Value* s) {
    return SmemTile{B.CreateAdd(region(plan.smem.v), B.CreateMul(s, e.c32(plan.smem.v_stage))), BN};
  };

  Value* q_start = B.CreateMul(q_tile, e.c32(BM));
  Value* q_last = B.CreateSub(B.CreateBinaryIntrinsic(llvm::Intrinsic::smin, seq_q, B.CreateAdd(q_start, e.c32(BM))), e.c32(1));

  ExprInputs ex = expr_inputs(e, *plan.spec, batch, head, head_kv);
  Value* heads_q = ex.heads_q;

  // Keys to visit and keys needing no mask: the closed form (never a block mask) or, for masks
  // it cannot describe exactly, the list the block-map pre-pass wrote for this query tile.
  KvBounds bounds = emit_kv_bounds(e, plan.spec->mask ? &plan.spec->kv_range : nullptr, kv_bounds_inputs(e, ex, q_start, q_last));
  Value* first_tile = B.CreateSDiv(bounds.visit_lo, e.c32(BN));
  Value* end_tile = B.CreateSDiv(B.CreateAdd(bounds.visit_hi, e.c32(BN - 1)), e.c32(BN));
  Value* n_tiles = B.CreateBinaryIntrinsic(llvm::Intrinsic::smax, B.CreateSub(end_tile, first_tile), zero);
  Value* tile_list = nullptr;
  if (plan.has_map()) {
    BlockMapRow row = block_map_row(e, plan.spec->block_map, plan.config, ex, q_tile);
    n_tiles = B.CreateAlignedLoad(e.i32(), row.count, llvm::Align(4));
    tile_list = row.tiles;
  }
  // Loop step i visits key tile tile_at(i) (and whether it is wholly visible, from the list).
  auto tile_entry = [&](Value* i) { return B.CreateAlignedLoad(e.i32(), B.CreateGEP(e.i32(), tile_list, i), llvm::Align(4)); };
  // With a pipeline (S ≥ 2), list entries of steps j .. j + S − 1 ride in registers, each loaded
  // one step before it is needed: a load at the point of use put an L1/L2 round trip in front of
  // every cp.async issue and every full/partial branch (docs/perf-notes.md §7). S = 1 configs are
  // the register-bound ones (d = 256 on mma.sync): they load at the point of use.
  const bool look_ahead = tile_list && S >= 2;
  std::vector<llvm::AllocaInst*> ahead;
  if (look_ahead) {
    for (int k = 0; k < S; ++k) {
      ahead.push_back(e.var(e.i32(), "entry", zero));
      e.when(B.CreateICmpSLT(e.c32(k), n_tiles), "entry", [&] { B.CreateStore(tile_entry(e.c32(k)), ahead[k]); });
    }
  }
  // `entry` is the list entry of step i when there is a list (nullptr otherwise).
  auto tile_at = [&](Value* i, Value* entry) -> Value* {
    if (!tile_list) return B.CreateAdd(first_tile, i);
    return B.CreateAnd(entry, e.c32(static_cast<int>(~kTileFullBit)));
  };

  // Tile i of the loop covers keys [(first_tile + i)·BN, +BN) and lives in stage i % S.
  auto issue_kv = [&](Value* j, Value* entry, bool once) {
    Value* stage = B.CreateURem(j, e.c32(S));
    Value* n0 = B.CreateMul(tile_at(j, entry), e.c32(BN));
    copy_tile(e, k_stage(stage), k_base, strides[1][1], n0, seq_kv, BN, d_qk, plan.threads, tid, once);
    copy_tile(e, v_stage(stage), v_base, strides[2][1], n0, seq_kv, BN, d_v, plan.threads, tid, once);
  };
  // The list entry of step j + k (k < S) inside step j, or of step k in the prologue.
  auto entry_at = [&](Value* j, int k) -> Value* {
    if (!tile_list) return nullptr;
    return look_ahead ? B.CreateLoad(e.i32(), ahead[k]) : tile_entry(B.CreateAdd(j, e.c32(k)));
  };

  // Prologue: Q, then the first num_stages − 1 K/V tiles, one commit group each.
  copy_tile(e, q_tile_smem, q_base, strides[0][1], q_start, seq_q, BM, d_qk, plan.threads, tid, /*once=*/true);
  tile::cp_async_commit(e);
  for (int s = 0; s + 1 < S; ++s) {
    e.when(B.CreateICmpSLT(e.c32(s), n_tiles), "prologue", [&] { issue_kv(e.c32(s), entry_at(zero, s), /*once=*/true); });
    tile::cp_async_commit(e);
  }
  tile::cp_async_wait(e, S - 1);  // the Q group is complete
  if (plan.wgmma) tile::fence_proxy_async(e);  // wgmma reads what cp.async wrote
  tile::sync_threads(e);

  // ldmatrix addresses (PTX ISA §9.7.13.4.15): lane l feeds row l % 8 of matrix l / 8.
  Value* l8 = B.CreateAnd(lane, e.c32(7));
  Value* bit3 = B.CreateAnd(B.CreateLShr(lane, 3), e.c32(1));
  Value* bit4 = B.CreateLShr(lane, 4);
  // A operand (Q): matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
  // Warp w owns MT m-tiles: rows 16·MT·w + 16·mt + [0, 16) of the CTA's block.
  const int MT = plan.m_tiles;
  Value* warp_row0 = B.CreateMul(warp, e.c32(16 * MT));
  FragAddr q_addr(e, BM, B.CreateAdd(warp_row0, B.CreateAdd(l8, B.CreateShl(bit3, 3))), bit4);
  auto load_q = [&](int mt, int kc) {
    return tile::ldmatrix_x4(e, q_addr.reg(e, q_tile_smem.base, kc), q_addr.imm(16 * mt, kc), false);
  };
  // wgmma: warpgroup w / 4 owns rows 64·(w / 4) .. +63 (its A descriptor starts there).
  Value* q_wg_base = B.CreateAdd(q_tile_smem.base, B.CreateMul(B.CreateLShr(warp, 2), e.c32(64 * 128)));
  std::vector<std::vector<Frag4>> q_frags(MT);
  if (plan.q_in_registers)
    for (int mt = 0; mt < MT; ++mt)
      for (int kc = 0; kc < plan.k_steps; ++kc) q_frags[mt].push_back(load_q(mt, kc));
  // B operand from K rows (keys × d): matrices (keys 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15).
  FragAddr k_addr(e, BN, B.CreateAdd(l8, B.CreateShl(bit4, 3)), bit3);
  // B operand from V rows with .trans (keys × d_v → k = key): (keys 0-7, n 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
  Value* v_row = B.CreateAdd(l8, B.CreateShl(bit3, 3));
  FragAddr v_addr(e, BN, v_row, bit4);
  // An odd last n-tile of V loads with .x2 from chunk OT − 1 (even): lanes 0-15 give its 16 keys.
  FragAddr v_last_addr(e, BN, v_row, zero);

  // Per-thread state, per m-tile: rows g and g + 8 of its 16.
  using Slots = std::array<llvm::AllocaInst*, 4>;
  std::vector<std::array<llvm::AllocaInst*, 2>> m(MT), l(MT);
  std::vector<std::vector<Slots>> o(MT, std::vector<Slots>(OT)), sacc(MT, std::vector<Slots>(NT));
  for (int mt = 0; mt < MT; ++mt) {
    for (int r = 0; r < 2; ++r) {
      m[mt][r] = e.var(e.f32(), "m", e.neg_inf());
      l[mt][r] = e.var(e.f32(), "l", e.cf(0.f));
    }
    for (auto& t : o[mt])
      for (auto& x : t) x = e.var(e.f32(), "o", e.cf(0.f));
    for (auto& t : sacc[mt])
      for (auto& x : t) x = e.var(e.f32(), "s");
  }
  // Query of fragment row g of m-tile mt (row g + 8 is 8 further).
  auto row_g = [&](int mt) { return B.CreateAdd(q_start, B.CreateAdd(warp_row0, B.CreateAdd(e.c32(16 * mt), g))); };

  e.loop(zero, n_tiles, 1, "kv", [&](Value* j) {
    // Entries of steps j and j + S − 1, read before the shift; without a look-ahead, `now` loads
    // at each point of use (one register fewer across the loop for the S = 1 configs).
    Value* ahead0 = look_ahead ? entry_at(j, 0) : nullptr;
    Value* ahead_issue = look_ahead ? entry_at(j, S - 1) : nullptr;
    auto now = [&](Value* cached, int k) { return cached ? cached : entry_at(j, k); };
    if (look_ahead) {
      // Shift, and fetch step j + S's entry (clamped: the loop runs only when n_tiles ≥ 1).
      for (int k = 0; k + 1 < S; ++k) B.CreateStore(B.CreateLoad(e.i32(), ahead[k + 1]), ahead[k]);
      Value* next = B.CreateBinaryIntrinsic(llvm::Intrinsic::smin, B.CreateAdd(j, e.c32(S)), B.CreateSub(n_tiles, e.c32(1)));
      B.CreateStore(tile_entry(next), ahead[S - 1]);
    }
    e.when(B.CreateICmpSLT(B.CreateAdd(j, e.c32(S - 1)), n_tiles), "issue", [&] {
      issue_kv(B.CreateAdd(j, e.c32(S - 1)), now(ahead_issue, S - 1), /*once=*/false);
    });
    tile::cp_async_commit(e);  // possibly empty: keeps "S − 1 groups pending" true at every wait
    tile::cp_async_wait(e, S - 1);
    if (plan.wgmma) tile::fence_proxy_async(e);
    tile::sync_threads(e);
    Value* stage = B.CreateURem(j, e.c32(S));
    SmemTile ks = k_stage(stage), vs = v_stage(stage);
    Value* n0 = B.CreateMul(tile_at(j, now(ahead0, 0)), e.c32(BN));

    // S = Q Kᵀ: each K fragment feeds all MT m-tiles.
    std::vector<std::vector<Acc4>> s(MT, std::vector<Acc4>(NT, Acc4{e.cf(0.f), e.cf(0.f), e.cf(0.f), e.cf(0.f)}));
    if (plan.wgmma) {
      // One warpgroup instruction per 16-wide k-step reads Q and K (K-major, 128-byte swizzle)
      // straight from shared memory: no ldmatrix, no per-fragment issue (PTX ISA §9.7.15), and no
      // A registers live across the loop (plan_forward says why).
      // The first k-step overwrites (scale-d = 0), as CUTLASS's first MMA of a tile does: no zeroed
      // accumulators written by ordinary instructions right before the group.
      std::vector<Value*> acc = tile::wgmma_fresh(e, BN);
      tile::wgmma_fence(e);
      for (int kc = 0; kc < plan.k_steps; ++kc) {
        tile::WgmmaA a;
        a.desc = tile::smem_desc(e, B.CreateAdd(q_wg_base, e.c32(128 * BM * (kc >> 2) + 32 * (kc & 3))), 16, 1024);
        Value* kd = tile::smem_desc(e, B.CreateAdd(ks.base, e.c32(128 * BN * (kc >> 2) + 32 * (kc & 3))), 16, 1024);
        acc = tile::wgmma(e, dt, BN, acc, a, kd, /*trans_b=*/false, /*accumulate=*/kc > 0);
      }
      tile::wgmma_commit(e);
      tile::wgmma_wait(e, acc);
      for (int nt = 0; nt < NT; ++nt)
        for (int i = 0; i < 4; ++i) s[0][nt][i] = acc[4 * nt + i];
    } else {
      for (int kc = 0; kc < plan.k_steps; ++kc) {
        std::vector<Frag4> qa(MT);
        for (int mt = 0; mt < MT; ++mt) qa[mt] = plan.q_in_registers ? q_frags[mt][kc] : load_q(mt, kc);
        for (int nt2 = 0; nt2 < NT / 2; ++nt2) {
          Frag4 kb = tile::ldmatrix_x4(e, k_addr.reg(e, ks.base, kc), k_addr.imm(16 * nt2, kc), false);
          for (int mt = 0; mt < MT; ++mt) {
            s[mt][2 * nt2] = tile::mma_16816(e, dt, qa[mt], kb[0], kb[1], s[mt][2 * nt2]);
            s[mt][2 * nt2 + 1] = tile::mma_16816(e, dt, qa[mt], kb[2], kb[3], s[mt][2 * nt2 + 1]);
          }
        }
      }
    }
    // Element (nt, i) of m-tile mt: key n0 + 8·nt + 2·t4 + (i & 1), row g + 8·(i >> 1).
    auto key_of = [&](int nt, int i) { return B.CreateAdd(n0, B.CreateAdd(e.c32(nt * 8 + (i & 1)), B.CreateShl(t4, 1))); };
    auto row_of = [&](int mt, int i) { return B.CreateAdd(row_g(mt), e.c32(8 * (i >> 1))); };
    // Expressions read q and kv clamped into range, so rows past seq_q and keys past seq_kv
    // (masked anyway) never index a tensor out of bounds.
    Value* last_q = B.CreateSub(seq_q, e.c32(1));
    Value* last_kv = B.CreateSub(seq_kv, e.c32(1));
    auto clamp = [&](Value* x, Value* hi) { return B.CreateBinaryIntrinsic(llvm::Intrinsic::smin, x, hi); };

    // Score modifier on scale·qkᵀ; its result goes to the exp2 domain (× log2 e) here, so
    // the softmax below multiplies by 1 instead of scale·log2 e.
    Value* multiplier = scale_log2;
    if (plan.spec->score) {
      Value* scale = B.CreateFMul(scale_log2, e.cf(static_cast<float>(M_LN2)));
      for (int mt = 0; mt < MT; ++mt)
        for (int nt = 0; nt < NT; ++nt)
          for (int i = 0; i < 4; ++i) {
            ExprInputs at = ex;
            at.q = clamp(row_of(mt, i), last_q);
            at.kv = clamp(key_of(nt, i), last_kv);
            at.score = B.CreateFMul(s[mt][nt][i], scale);
            s[mt][nt][i] = B.CreateFMul(lower_expr(e, *plan.spec->score, at), e.cf(static_cast<float>(M_LOG2E)));
          }
      multiplier = e.cf(1.f);
    }
    for (int mt = 0; mt < MT; ++mt)
      for (int nt = 0; nt < NT; ++nt)
        for (int i = 0; i < 4; ++i) B.CreateStore(s[mt][nt][i], sacc[mt][nt][i]);

    // The mask runs only in tiles that are not wholly inside [full_lo, full_hi) (or flagged full).
    Value* full = tile_list ? B.CreateICmpSLT(now(ahead0, 0), zero)
                            : B.CreateAnd(B.CreateICmpSGE(n0, bounds.full_lo), B.CreateICmpSLE(B.CreateAdd(n0, e.c32(BN)), bounds.full_hi));
    e.when(B.CreateNot(full), "mask", [&] {
      for (int mt = 0; mt < MT; ++mt)
        for (int nt = 0; nt < NT; ++nt)
          for (int i = 0; i < 4; ++i) {
            Value* key = key_of(nt, i);
            Value* visible = B.CreateICmpSLT(key, seq_kv);
            if (plan.spec->mask) {
              ExprInputs at = ex;
              at.q = clamp(row_of(mt, i), last_q);
              at.kv = clamp(key, last_kv);
              visible = B.CreateAnd(visible, lower_expr(e, *plan.spec->mask, at));
            }
            B.CreateStore(B.CreateSelect(visible, B.CreateLoad(e.f32(), sacc[mt][nt][i]), e.neg_inf()), sacc[mt][nt][i]);
          }
    });
    for (int mt = 0; mt < MT; ++mt)
      for (int nt = 0; nt < NT; ++nt)
        for (int i = 0; i < 4; ++i) s[mt][nt][i] = B.CreateLoad(e.f32(), sacc[mt][nt][i]);

    // Online softmax (exp2 domain, scale folded in): one FFMA and one ex2.approx per score.
    for (int mt = 0; mt < MT; ++mt)
      for (int r = 0; r < 2; ++r) {
        Value* mx = e.neg_inf();
        for (int nt = 0; nt < NT; ++nt) mx = B.CreateMaxNum(mx, B.CreateMaxNum(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
        Value* m_old = B.CreateLoad(e.f32(), m[mt][r]);
        Value* m_new = B.CreateMaxNum(m_old, quad_max(e, mx));
        Value* m_use = B.CreateSelect(B.CreateFCmpOEQ(m_new, e.neg_inf()), e.cf(0.f), m_new);
        Value* neg_ms = B.CreateFNeg(B.CreateFMul(m_use, multiplier));
        Value* alpha = tile::exp2_fast(e, B.CreateIntrinsic(llvm::Intrinsic::fma, {e.f32()}, {m_old, multiplier, neg_ms}));
        Value* sum = e.cf(0.f);
        for (int nt = 0; nt < NT; ++nt)
          for (int c = 0; c < 2; ++c) {
            Value*& x = s[mt][nt][2 * r + c];
            x = tile::exp2_fast(e, B.CreateIntrinsic(llvm::Intrinsic::fma, {e.f32()}, {x, multiplier, neg_ms}));
            sum = B.CreateFAdd(sum, x);
          }
        B.CreateStore(m_new, m[mt][r]);
        B.CreateStore(B.CreateFAdd(B.CreateFMul(B.CreateLoad(e.f32(), l[mt][r]), alpha), sum), l[mt][r]);
        for (int ot = 0; ot < OT; ++ot)
          for (int c = 0; c < 2; ++c)
            B.CreateStore(B.CreateFMul(B.CreateLoad(e.f32(), o[mt][ot][2 * r + c]), alpha), o[mt][ot][2 * r + c]);
      }

    // O += P V, P taken from the S accumulators as A fragments (two 8-key tiles per 16-key
    // k-step); each V fragment feeds all MT m-tiles.
    std::vector<std::vector<Acc4>> oacc(MT, std::vector<Acc4>(OT));
    for (int mt = 0; mt < MT; ++mt)
      for (int ot = 0; ot < OT; ++ot)
        for (int i = 0; i < 4; ++i) oacc[mt][ot][i] = B.CreateLoad(e.f32(), o[mt][ot][i]);
    auto p_frag = [&](int mt, int kc) -> Frag4 {
      const Acc4& lo = s[mt][2 * kc];
      const Acc4& hi = s[mt][2 * kc + 1];
      return {tile::pack_pair_rn(e, lo[0], lo[1], dt), tile::pack_pair_rn(e, lo[2], lo[3], dt),
              tile::pack_pair_rn(e, hi[0], hi[1], dt), tile::pack_pair_rn(e, hi[2], hi[3], dt)};
    };
    if (plan.wgmma) {
      // P (registers, the A layout) × V (shared memory, MN-major: d_v contiguous, hence trans-b),
      // one instruction per 16 keys and 64-column panel of O (the last one n = what is left).
      std::vector<Value*> acc, p_regs;
      for (int ot = 0; ot < OT; ++ot)
        for (int i = 0; i < 4; ++i) acc.push_back(oacc[0][ot][i]);
      for (int kc = 0; kc < NT / 2; ++kc)
        for (Value* r : p_frag(0, kc)) p_regs.push_back(r);
      const size_t n_acc = acc.size();
      acc.insert(acc.end(), p_regs.begin(), p_regs.end());
      tile::wgmma_fence(e, acc);  // O was just rescaled and P packed by ordinary instructions
      p_regs.assign(acc.begin() + n_acc, acc.end());
      acc.resize(n_acc);
      for (int kc = 0; kc < NT / 2; ++kc) {
        tile::WgmmaA a;
        for (int i = 0; i < 4; ++i) a.regs[i] = p_regs[4 * kc + i];
        for (int p = 0; 64 * p < 8 * OT; ++p) {
          const int n = std::min(64, 8 * OT - 64 * p);
          Value* vd = tile::smem_desc(e, B.CreateAdd(vs.base, e.c32(128 * BN * p + 2048 * kc)), 128 * BN, 1024);
          std::vector<Value*> part(acc.begin() + 32 * p, acc.begin() + 32 * p + n / 2);
          part = tile::wgmma(e, dt, n, part, a, vd, /*trans_b=*/true);
          std::copy(part.begin(), part.end(), acc.begin() + 32 * p);
        }
      }
      tile::wgmma_commit(e);
      tile::wgmma_wait(e, acc);
      for (int ot = 0; ot < OT; ++ot)
        for (int i = 0; i < 4; ++i) oacc[0][ot][i] = acc[4 * ot + i];
    } else {
      for (int kc = 0; kc < NT / 2; ++kc) {
        std::vector<Frag4> pa(MT);
        for (int mt = 0; mt < MT; ++mt) pa[mt] = p_frag(mt, kc);
        for (int vp = 0; vp < OT / 2; ++vp) {
          Frag4 vb = tile::ldmatrix_x4(e, v_addr.reg(e, vs.base, vp), v_addr.imm(16 * kc, vp), true);
          for (int mt = 0; mt < MT; ++mt) {
            oacc[mt][2 * vp] = tile::mma_16816(e, dt, pa[mt], vb[0], vb[1], oacc[mt][2 * vp]);
            oacc[mt][2 * vp + 1] = tile::mma_16816(e, dt, pa[mt], vb[2], vb[3], oacc[mt][2 * vp + 1]);
          }
        }
        if (OT % 2) {
          const int c = (OT - 1) / 2;
          auto vb = tile::ldmatrix_x2(e, v_last_addr.reg(e, vs.base, c), v_last_addr.imm(16 * kc, c), true);
          for (int mt = 0; mt < MT; ++mt) oacc[mt][OT - 1] = tile::mma_16816(e, dt, pa[mt], vb[0], vb[1], oacc[mt][OT - 1]);
        }
      }
    }
    for (int mt = 0; mt < MT; ++mt)
      for (int ot = 0; ot < OT; ++ot)
        for (int i = 0; i < 4; ++i) B.CreateStore(oacc[mt][ot][i], o[mt][ot][i]);
    tile::sync_threads(e);  // this stage is refilled by the next iteration's cp.async
  });
  tile::cp_async_wait(e, 0);

  // Epilogue: O = acc / l, LSE = ln Σ e^{score} = (m·multiplier + log2 l)·ln 2; masked rows → 0, −inf.
  Value* lse_ptr = arg(kParamLse);
  Value* o_base = base(kParamO, 3, head);  // here, not before the loop: nothing stays live across it
  for (int mt = 0; mt < MT; ++mt)
    for (int r = 0; r < 2; ++r) {
      Value* row = B.CreateAdd(row_g(mt), e.c32(8 * r));
      Value* lsum = quad_sum(e, B.CreateLoad(e.f32(), l[mt][r]));
      Value* mrow = B.CreateLoad(e.f32(), m[mt][r]);
      e.when(B.CreateICmpSLT(row, seq_q), "store", [&] {
        Value* any = B.CreateFCmpOGT(lsum, e.cf(0.f));
        Value* inv = B.CreateSelect(any, B.CreateFDiv(e.cf(1.f), lsum), e.cf(0.f));
        Value* row_ptr = B.CreateGEP(B.getInt16Ty(), o_base, B.CreateMul(B.CreateSExt(row, e.i64()), strides[3][1]));
        for (int ot = 0; ot < OT; ++ot) {
          Value* x = B.CreateFMul(B.CreateLoad(e.f32(), o[mt][ot][2 * r]), inv);
          Value* y = B.CreateFMul(B.CreateLoad(e.f32(), o[mt][ot][2 * r + 1]), inv);
          Value* col = B.CreateAdd(e.c32(ot * 8), B.CreateShl(t4, 1));
          B.CreateAlignedStore(tile::pack_pair_rn(e, x, y, dt), B.CreateGEP(B.getInt16Ty(), row_ptr, col), llvm::Align(4));
        }
        Value* has_lse = B.CreateICmpNE(lse_ptr, llvm::ConstantPointerNull::get(llvm::PointerType::get(e.ctx, 1)));
        e.when(B.CreateAnd(has_lse, B.CreateICmpEQ(t4, zero)), "store.lse", [&] {
          Value* log2_sum = B.CreateFAdd(B.CreateFMul(mrow, plan.spec->score ? e.cf(1.f) : scale_log2), tile::log2_fast(e, lsum));
          Value* lse = B.CreateSelect(any, B.CreateFMul(log2_sum, e.cf(static_cast<float>(M_LN2))), e.neg_inf());
          // LSE is [batch, heads_q, seq_q]: index ((b·H + h)·S + q) with H = gridDim.y.
          Value* idx = B.CreateAdd(B.CreateMul(B.CreateZExt(batch, e.i64()), B.CreateZExt(heads_q, e.i64())),
                                   B.CreateZExt(head, e.i64()));
          idx = B.CreateAdd(B.CreateMul(idx, B.CreateSExt(seq_q, e.i64())), B.CreateSExt(row, e.i64()));
          B.CreateStore(lse, B.CreateGEP(e.f32(), lse_ptr, idx));
        });
      });
    }
  B.CreateRetVoid();
  return fn;
}

}  // namespace flashjit

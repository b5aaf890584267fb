#include "compiler/tile/tensor_core.hpp"

#include <algorithm>
#include <optional>

#include "compiler/tile/mma.hpp"
#include "compiler/tile/wgmma.hpp"

namespace flashjit::tile {

namespace {

using llvm::Value;

// P's A fragment for k-step kc of m-tile mt: the C layout of two 8-column n-tiles is the A layout
// of one 16-wide k-step, pairwise (PTX ISA §9.7.13.4.8), so P never goes through memory.
Frag4 pack_a(Emitter& e, const RegTile& p, int mt, int kc, DType dt) {
  const Acc4& lo = p[mt][2 * kc];
  const Acc4& hi = p[mt][2 * kc + 1];
  return {pack_pair_rn(e, lo[0], lo[1], dt), pack_pair_rn(e, lo[2], lo[3], dt), pack_pair_rn(e, hi[0], hi[1], dt),
          pack_pair_rn(e, hi[2], hi[3], dt)};
}

// mma.sync m16n8k16: warp w owns m_tiles 16-row m-tiles, rows 16·m_tiles·w + 16·mt + [0, 16) of
// the CTA's block; operands come from shared memory through ldmatrix.
class WarpMma final : public TensorCore {
 public:
  WarpMma(const MmaShape& s, Value* warp, Value* lane) : s_(s), warp_(warp), lane_(lane) {}

  void prepare(Emitter& e, const SmemTile& a) override {
    auto& B = e.b;
    // ldmatrix addresses (PTX ISA §9.7.13.4.15): lane l feeds row l % 8 of matrix l / 8.
    Value* l8 = B.CreateAnd(lane_, e.c32(7));
    Value* bit3 = B.CreateAnd(B.CreateLShr(lane_, 3), e.c32(1));
    Value* bit4 = B.CreateLShr(lane_, 4);
    // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
    warp_row0_ = B.CreateMul(warp_, e.c32(16 * s_.m_tiles));
    a_addr_.emplace(e, s_.rows, B.CreateAdd(warp_row0_, B.CreateAdd(l8, B.CreateShl(bit3, 3))), bit4);
    a_ = a;
    a_frags_.assign(s_.m_tiles, {});
    if (s_.a_in_registers)
      for (int mt = 0; mt < s_.m_tiles; ++mt)
        for (int kc = 0; kc < s_.k_steps; ++kc) a_frags_[mt].push_back(load_a(e, mt, kc));
    // B from rows of keys (keys × d): matrices (keys 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15).
    b_addr_.emplace(e, s_.cols, B.CreateAdd(l8, B.CreateShl(bit4, 3)), bit3);
    // V with .trans (keys × d_v → k = key): (keys 0-7, n 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15).
    Value* v_row = B.CreateAdd(l8, B.CreateShl(bit3, 3));
    v_addr_.emplace(e, s_.cols, v_row, bit4);
    // An odd last n-tile of V loads with .x2 from chunk out_tiles − 1 (even): lanes 0-15 give its 16 keys.
    v_last_addr_.emplace(e, s_.cols, v_row, e.c32(0));
  }

  Value* warp_row0() const override { return warp_row0_; }

  void publish_shared(Emitter&) const override {}  // ldmatrix reads through the generic proxy

  RegTile mma_abt(Emitter& e, const SmemTile& b) override {
    const int MT = s_.m_tiles, NT = s_.cols / 8;
    RegTile s = zero_tile(e, MT, NT);
    // Each B fragment feeds all m-tiles.
    for (int kc = 0; kc < s_.k_steps; ++kc) {
      std::vector<Frag4> qa(MT);
      for (int mt = 0; mt < MT; ++mt) qa[mt] = s_.a_in_registers ? a_frags_[mt][kc] : load_a(e, mt, kc);
      for (int nt2 = 0; nt2 < NT / 2; ++nt2) {
        Frag4 kb = ldmatrix_x4(e, b_addr_->reg(e, b.base, kc), b_addr_->imm(16 * nt2, kc), false);
        for (int mt = 0; mt < MT; ++mt) {
          s[mt][2 * nt2] = mma_16816(e, s_.dtype, qa[mt], kb[0], kb[1], s[mt][2 * nt2]);
          s[mt][2 * nt2 + 1] = mma_16816(e, s_.dtype, qa[mt], kb[2], kb[3], s[mt][2 * nt2 + 1]);
        }
      }
    }
    return s;
  }

  void mma_pv(Emitter& e, RegTile& acc, const RegTile& p, const SmemTile& v) override {
    const int MT = s_.m_tiles, NT = s_.cols / 8, OT = s_.out_tiles;
    // Two 8-key n-tiles of P per 16-key k-step; each V fragment feeds all m-tiles.
    for (int kc = 0; kc < NT / 2; ++kc) {
      std::vector<Frag4> pa(MT);
      for (int mt = 0; mt < MT; ++mt) pa[mt] = pack_a(e, p, mt, kc, s_.dtype);
      for (int vp = 0; vp < OT / 2; ++vp) {
        Frag4 vb = ldmatrix_x4(e, v_addr_->reg(e, v.base, vp), v_addr_->imm(16 * kc, vp), true);
        for (int mt = 0; mt < MT; ++mt) {
          acc[mt][2 * vp] = mma_16816(e, s_.dtype, pa[mt], vb[0], vb[1], acc[mt][2 * vp]);
          acc[mt][2 * vp + 1] = mma_16816(e, s_.dtype, pa[mt], vb[2], vb[3], acc[mt][2 * vp + 1]);
        }
      }
      if (OT % 2) {
        const int c = (OT - 1) / 2;
        auto vb = ldmatrix_x2(e, v_last_addr_->reg(e, v.base, c), v_last_addr_->imm(16 * kc, c), true);
        for (int mt = 0; mt < MT; ++mt) acc[mt][OT - 1] = mma_16816(e, s_.dtype, pa[mt], vb[0], vb[1], acc[mt][OT - 1]);
      }
    }
  }

 private:
  Frag4 load_a(Emitter& e, int mt, int kc) {
    return ldmatrix_x4(e, a_addr_->reg(e, a_.base, kc), a_addr_->imm(16 * mt, kc), false);
  }

  MmaShape s_;
  Value *warp_, *lane_, *warp_row0_ = nullptr;
  SmemTile a_{nullptr, 0};
  std::optional<FragAddr> a_addr_, b_addr_, v_addr_, v_last_addr_;
  std::vector<std::vector<Frag4>> a_frags_;
};

// wgmma.mma_async: warpgroup w / 4 computes rows 64·(w / 4) .. +63 of the CTA's block, warp w % 4
// rows 16·(w % 4) .. +15 of those. A and B of S = A·Bᵀ are read by shared-memory descriptor (K-major,
// 128-byte swizzle), as FlashAttention-3 does: no A operand is held in registers across the loop;
// P of O += P·V comes from registers, V by descriptor (MN-major: d_v contiguous, hence trans-b).
class WarpgroupMma final : public TensorCore {
 public:
  WarpgroupMma(const MmaShape& s, Value* warp) : s_(s), warp_(warp) {}

  void prepare(Emitter& e, const SmemTile& a) override {
    auto& B = e.b;
    warp_row0_ = B.CreateMul(warp_, e.c32(16 * s_.m_tiles));
    a_base_ = B.CreateAdd(a.base, B.CreateMul(B.CreateLShr(warp_, 2), e.c32(64 * 128)));
  }

  Value* warp_row0() const override { return warp_row0_; }

  // wgmma reads shared memory through the async proxy (PTX ISA §9.7.12.4).
  void publish_shared(Emitter& e) const override { fence_proxy_async(e); }

  RegTile mma_abt(Emitter& e, const SmemTile& b) override {
    RegTile s = mma_abt_async(e, b);
    wait(e, s, 0);
    return s;
  }

  RegTile mma_abt_async(Emitter& e, const SmemTile& b) override {
    auto& B = e.b;
    const int BM = s_.rows, BN = s_.cols;
    RegTile s = zero_tile(e, 1, BN / 8);
    // One instruction per 16-wide k-step. The first overwrites (scale-d = 0), as CUTLASS's first
    // MMA of a tile does: no zeroed accumulators written by ordinary instructions before the group.
    WgmmaSequence seq(e, s_.dtype, wgmma_fresh(e, BN), s_.one_statement);
    wgmma_fence(e);
    for (int kc = 0; kc < s_.k_steps; ++kc) {
      WgmmaStep st;
      st.n = BN;
      st.a.desc = smem_desc(e, B.CreateAdd(a_base_, e.c32(128 * BM * (kc >> 2) + 32 * (kc & 3))), 16, 1024);
      st.b_desc = smem_desc(e, B.CreateAdd(b.base, e.c32(128 * BN * (kc >> 2) + 32 * (kc & 3))), 16, 1024);
      st.accumulate = kc > 0;
      seq.add(st);
    }
    const std::vector<Value*> acc = seq.finish();
    wgmma_commit(e);
    for (int nt = 0; nt < BN / 8; ++nt)
      for (int i = 0; i < 4; ++i) s[0][nt][i] = acc[4 * nt + i];
    return s;
  }

  void wait(Emitter& e, RegTile& t, int pending, std::vector<Value*>* also = nullptr) override {
    std::vector<Value*> vals;
    for (auto& row : t)
      for (auto& f : row) vals.insert(vals.end(), f.begin(), f.end());
    if (also) vals.insert(vals.end(), also->begin(), also->end());
    wgmma_wait(e, vals, pending);
    size_t k = 0;
    for (auto& row : t)
      for (auto& f : row)
        for (Value*& x : f) x = vals[k++];
    if (also) std::copy(vals.begin() + k, vals.end(), also->begin());
  }

  void mma_pv(Emitter& e, RegTile& out, const RegTile& p, const SmemTile& v) override {
    mma_pv_async(e, out, pack_p(e, p), v);
    wait(e, out, 0);
  }

  std::vector<Value*> pack_p(Emitter& e, const RegTile& p) override {
    std::vector<Value*> p_regs;
    for (int kc = 0; kc < s_.cols / 16; ++kc)
      for (Value* r : pack_a(e, p, 0, kc, s_.dtype)) p_regs.push_back(r);
    return p_regs;
  }

  void mma_pv_async(Emitter& e, RegTile& out, std::vector<Value*> p_regs, const SmemTile& v) override {
    auto& B = e.b;
    const int BN = s_.cols, NT = BN / 8, OT = s_.out_tiles;
    // One instruction per 16 keys and 64-column panel of O (the last one n = what is left), or
    // with MmaShape::whole_pv one per 16 keys across every panel.
    std::vector<Value*> acc;
    for (int ot = 0; ot < OT; ++ot)
      for (int i = 0; i < 4; ++i) acc.push_back(out[0][ot][i]);
    const size_t n_acc = acc.size();
    acc.insert(acc.end(), p_regs.begin(), p_regs.end());
    wgmma_fence(e, acc);  // O was just rescaled and P packed by ordinary instructions
    p_regs.assign(acc.begin() + n_acc, acc.end());
    acc.resize(n_acc);
    const bool whole = s_.whole_pv && 8 * OT % 64 == 0 && 8 * OT <= 256;
    const int width = whole ? 8 * OT : 64;  // columns per instruction
    WgmmaSequence seq(e, s_.dtype, acc, s_.one_statement);
    for (int kc = 0; kc < NT / 2; ++kc)
      for (int panel = 0; width * panel < 8 * OT; ++panel) {
        WgmmaStep st;
        for (int i = 0; i < 4; ++i) st.a.regs[i] = p_regs[4 * kc + i];
        st.n = std::min(width, 8 * OT - width * panel);
        st.acc_at = width / 2 * panel;
        const int at = 128 * BN * (width / 64) * panel + 2048 * kc;
        st.b_desc = smem_desc(e, B.CreateAdd(v.base, e.c32(at)), 128 * BN, 1024);
        st.trans_b = true;
        seq.add(st);
      }
    acc = seq.finish();
    wgmma_commit(e);
    for (int ot = 0; ot < OT; ++ot)
      for (int i = 0; i < 4; ++i) out[0][ot][i] = acc[4 * ot + i];
  }

 private:
  MmaShape s_;
  Value *warp_, *warp_row0_ = nullptr, *a_base_ = nullptr;
};

}  // namespace

std::vector<Value*> TensorCore::pack_p(Emitter&, const RegTile&) {
  throw Error(ErrorKind::internal, "internal error: P packed for an asynchronous product on mma.sync");
}

void TensorCore::mma_pv_async(Emitter&, RegTile&, std::vector<Value*>, const SmemTile&) {
  throw Error(ErrorKind::internal, "internal error: an asynchronous P·V product on mma.sync");
}

std::unique_ptr<TensorCore> make_tensor_core(bool warpgroup, const MmaShape& shape, Value* warp, Value* lane) {
  if (warpgroup) return std::make_unique<WarpgroupMma>(shape, warp);
  return std::make_unique<WarpMma>(shape, warp, lane);
}

}  // namespace flashjit::tile

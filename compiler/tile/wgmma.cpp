#include "compiler/tile/wgmma.hpp"

#include <llvm/IR/Constants.h>

#include <algorithm>
#include <string>

#include "compiler/tile/gpu.hpp"
#include "compiler/tile/inline_ptx.hpp"

namespace flashjit::tile {

namespace {

llvm::CallInst* asm_call(Emitter& e, llvm::Type* ret, const std::vector<llvm::Value*>& args, const std::string& text,
                         const std::string& constraints) {
  llvm::CallInst* call = inline_ptx(e, ret, args, text, constraints);
  call->setConvergent();  // .sync.aligned: the whole warp (warpgroup) executes it together
  return call;
}

// Runs `text` with `vals` as tied in/out operands ("+f"/"+r"); the results replace `vals`.
void through_asm(Emitter& e, std::vector<llvm::Value*>& vals, const std::string& text) {
  if (vals.empty()) {
    asm_call(e, e.b.getVoidTy(), {}, text, "~{memory}");
    return;
  }
  std::vector<llvm::Type*> types;
  std::string outs, ins;
  for (size_t i = 0; i < vals.size(); ++i) {
    types.push_back(vals[i]->getType());
    const char* c = vals[i]->getType()->isFloatTy() ? "=f" : "=r";
    outs += std::string(i ? "," : "") + c;
    ins += "," + std::to_string(i);
  }
  // One output is returned as itself, several as a struct (LLVM's inline-asm rule).
  llvm::Type* ret = types.size() == 1 ? types[0] : llvm::StructType::get(e.ctx, types);
  llvm::Value* r = asm_call(e, ret, vals, text, outs + ins + ",~{memory}");
  if (types.size() == 1) vals[0] = r;
  else
    for (size_t i = 0; i < vals.size(); ++i) vals[i] = e.b.CreateExtractValue(r, static_cast<unsigned>(i));
}

// One asm statement of wgmmas on one set of accumulators. Each step has a { } scope of its own, so
// its predicate and added descriptors are local to it; an input an earlier step already passed is
// named again rather than passed twice.
class WgmmaBlock {
 public:
  WgmmaBlock(Emitter& e, DType dtype, const std::vector<llvm::Value*>& acc)
      : e_(e), ab_(dtype == DType::bf16 ? "bf16" : "f16"), nacc_(static_cast<int>(acc.size())), args_(acc) {
    for (int i = 0; i < nacc_; ++i) constraints_ += (i ? ",=f" : "=f");
    for (int i = 0; i < nacc_; ++i) constraints_ += "," + std::to_string(i);
  }

  void add(const WgmmaStep& st) {
    const size_t earlier = args_.size();
    auto input = [&](llvm::Value* v, const char* c) {
      for (size_t i = nacc_; i < earlier; ++i)
        if (args_[i] == v) return "$" + std::to_string(nacc_ + i);
      args_.push_back(v);
      constraints_ += std::string(",") + c;
      return "$" + std::to_string(nacc_ + args_.size() - 1);
    };
    std::string a_text;
    if (st.a.desc) {
      a_text = input(st.a.desc, "l");
    } else {
      a_text = "{";
      for (int i = 0; i < 4; ++i) a_text += (i ? ", " : "") + input(st.a.regs[i], "r");
      a_text += "}";
    }
    std::string b_text = input(st.b_desc, "l");
    const std::string scale_d = input(e_.c32(st.accumulate ? 1 : 0), "r");
    // scale-d (a predicate): 1 accumulates, 0 overwrites; scale-a = scale-b = 1; trans-a (descriptor
    // A only). A descriptor's start address is its low 14 bits in 16-byte units; the offsets stay
    // inside it.
    std::string adds;
    auto added = [&](std::string& operand, int bytes, const char* reg) {
      if (!bytes) return;
      adds += ".reg .b64 " + std::string(reg) + ";\nadd.s64 " + reg + ", " + operand + ", " +
              std::to_string(bytes >> 4) + ";\n";
      operand = reg;
    };
    if (st.a.desc) added(a_text, st.a.desc_add, "da");
    added(b_text, st.b_desc_add, "db");
    text_ += std::string(text_.empty() ? "" : "\n") + "{\n.reg .pred p;\n" + adds + "setp.ne.b32 p, " + scale_d +
             ", 0;\nwgmma.mma_async.sync.aligned.m64n" + std::to_string(st.n) + "k16.f32." + ab_ + "." + ab_ + " " +
             asm_reg_list(st.acc_at, st.n / 2) + ", " + a_text + ", " + b_text + ", p, 1, 1, " +
             (st.a.desc ? (st.trans_a ? "1, " : "0, ") : "") + (st.trans_b ? "1" : "0") + ";\n}";
  }

  std::vector<llvm::Value*> issue() {
    std::vector<llvm::Type*> types(nacc_, e_.f32());
    llvm::Value* r = asm_call(e_, llvm::StructType::get(e_.ctx, types), args_, text_, constraints_ + ",~{memory}");
    std::vector<llvm::Value*> out(nacc_);
    for (int i = 0; i < nacc_; ++i) out[i] = e_.b.CreateExtractValue(r, static_cast<unsigned>(i));
    return out;
  }

 private:
  Emitter& e_;
  const char* ab_;
  int nacc_;
  std::vector<llvm::Value*> args_;
  std::string constraints_, text_;
};

}  // namespace

llvm::Value* smem_desc(Emitter& e, llvm::Value* addr, int lbo_bytes, int sbo_bytes) {
  auto& B = e.b;
  llvm::Value* start = B.CreateZExt(B.CreateLShr(B.CreateAnd(addr, e.c32(0x3FFFF)), 4), e.i64());
  const uint64_t fixed = (uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16) | (uint64_t((sbo_bytes >> 4) & 0x3FFF) << 32) |
                         (uint64_t(1) << 62);
  return B.CreateOr(start, e.c64(static_cast<int64_t>(fixed)));
}

std::vector<llvm::Value*> wgmma(Emitter& e, DType dtype, int n, const std::vector<llvm::Value*>& acc, const WgmmaA& a,
                                llvm::Value* b_desc, bool trans_b, bool accumulate, bool trans_a, int b_desc_add) {
  WgmmaBlock block(e, dtype, acc);
  block.add({n, 0, a, b_desc, b_desc_add, trans_b, accumulate, trans_a});
  return block.issue();
}

WgmmaSequence::WgmmaSequence(Emitter& e, DType dtype, std::vector<llvm::Value*> acc, bool one_statement)
    : e_(e), dtype_(dtype), acc_(std::move(acc)), one_statement_(one_statement) {}

void WgmmaSequence::add(const WgmmaStep& st) {
  if (one_statement_) {
    steps_.push_back(st);
    return;
  }
  std::vector<llvm::Value*> part(acc_.begin() + st.acc_at, acc_.begin() + st.acc_at + st.n / 2);
  part = wgmma(e_, dtype_, st.n, part, st.a, st.b_desc, st.trans_b, st.accumulate, st.trans_a, st.b_desc_add);
  std::copy(part.begin(), part.end(), acc_.begin() + st.acc_at);
}

std::vector<llvm::Value*> WgmmaSequence::finish() {
  if (!steps_.empty()) {
    WgmmaBlock block(e_, dtype_, acc_);
    for (const WgmmaStep& st : steps_) block.add(st);
    acc_ = block.issue();
    steps_.clear();
  }
  return acc_;
}

std::vector<llvm::Value*> wgmma_mn_major(Emitter& e, DType dtype, const SmemTile& a, int a_panel, const SmemTile& b,
                                         int b_col, int n, int k_steps) {
  auto& B = e.b;
  std::vector<llvm::Value*> acc = wgmma_fresh(e, n);
  wgmma_fence(e);
  // MN-major 128-byte swizzle: a 16-row k-step is 2048 bytes on from the last; along MN at most one
  // 64-element panel per instruction (lbo, the panel distance, is then never used). A start
  // inside a panel's 128-byte rows is swizzled like the K-major k-steps' 32-byte starts (the XOR
  // takes the row from address bits 7-9, which stay the row's).
  // Descriptors built here, from addresses LLVM cannot hoist (in_loop): a product inside a loop
  // then holds no descriptor registers across it.
  WgmmaA ad;
  ad.desc = smem_desc(e, in_loop(e, B.CreateAdd(a.base, e.c32(128 * a.rows * a_panel))), 128 * a.rows, 1024);
  llvm::Value* b_at = in_loop(e, B.CreateAdd(b.base, e.c32(128 * b.rows * (b_col / 64) + 2 * (b_col % 64))));
  llvm::Value* bd = smem_desc(e, b_at, 128 * b.rows, 1024);
  for (int kc = 0; kc < k_steps; ++kc) {
    ad.desc_add = 2048 * kc;
    acc = wgmma(e, dtype, n, acc, ad, bd, /*trans_b=*/true, /*accumulate=*/kc > 0, /*trans_a=*/true, 2048 * kc);
  }
  wgmma_commit(e);
  wgmma_wait(e, acc);
  return acc;
}

std::vector<llvm::Value*> wgmma_fresh(Emitter& e, int n) {
  return std::vector<llvm::Value*>(n / 2, llvm::UndefValue::get(e.f32()));
}

void wgmma_fence(Emitter& e, std::vector<llvm::Value*>& vals) { through_asm(e, vals, "wgmma.fence.sync.aligned;"); }

void wgmma_fence(Emitter& e) {
  std::vector<llvm::Value*> none;
  wgmma_fence(e, none);
}

void wgmma_commit(Emitter& e) {
  std::vector<llvm::Value*> none;
  through_asm(e, none, "wgmma.commit_group.sync.aligned;");
}

void wgmma_wait(Emitter& e, std::vector<llvm::Value*>& vals, int pending) {
  through_asm(e, vals, "wgmma.wait_group.sync.aligned " + std::to_string(pending) + ";");
}

void fence_proxy_async(Emitter& e) {
  std::vector<llvm::Value*> none;
  through_asm(e, none, "fence.proxy.async.shared::cta;");
}

}  // namespace flashjit::tile

#include "compiler/tile/wgmma.hpp"

#include <llvm/IR/Constants.h>
#include <llvm/IR/InlineAsm.h>

#include "compiler/tile/inline_ptx.hpp"

#include <string>

namespace flashjit::tile {

namespace {

llvm::CallInst* asm_call(Emitter& e, llvm::Type* ret, const std::vector<llvm::Value*>& args, const std::string& text,
                         const std::string& constraints) {
  std::vector<llvm::Type*> types;
  for (llvm::Value* a : args) types.push_back(a->getType());
  auto* fn = llvm::FunctionType::get(ret, types, false);
  llvm::CallInst* call = e.b.CreateCall(llvm::InlineAsm::get(fn, text, constraints, /*hasSideEffects=*/true), args);
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

}  // namespace

llvm::Value* smem_desc(Emitter& e, llvm::Value* addr, int lbo_bytes, int sbo_bytes) {
  auto& B = e.b;
  llvm::Value* start = B.CreateZExt(B.CreateLShr(B.CreateAnd(addr, e.c32(0x3FFFF)), 4), e.i64());
  const uint64_t fixed = (uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16) | (uint64_t((sbo_bytes >> 4) & 0x3FFF) << 32) |
                         (uint64_t(1) << 62);
  return B.CreateOr(start, e.c64(static_cast<int64_t>(fixed)));
}

std::vector<llvm::Value*> wgmma(Emitter& e, DType dtype, int n, const std::vector<llvm::Value*>& acc, const WgmmaA& a,
                                llvm::Value* b_desc, bool trans_b, bool accumulate) {
  const int nacc = n / 2;
  const char* ab = dtype == DType::bf16 ? "bf16" : "f16";
  std::vector<llvm::Value*> args(acc.begin(), acc.end());
  std::string constraints;
  for (int i = 0; i < nacc; ++i) constraints += (i ? ",=f" : "=f");
  for (int i = 0; i < nacc; ++i) constraints += "," + std::to_string(i);
  std::string a_text;
  int next = 2 * nacc;  // operand number of the first non-accumulator input
  if (a.desc) {
    args.push_back(a.desc);
    constraints += ",l";
    a_text = "$" + std::to_string(next++);
  } else {
    for (llvm::Value* r : a.regs) args.push_back(r);
    constraints += ",r,r,r,r";
    a_text = asm_reg_list(next, 4);
    next += 4;
  }
  args.push_back(b_desc);
  constraints += ",l";
  const std::string b_text = "$" + std::to_string(next++);
  args.push_back(e.c32(accumulate ? 1 : 0));
  constraints += ",r,~{memory}";
  const std::string scale_d = "$" + std::to_string(next++);
  // scale-d (a predicate): 1 accumulates, 0 overwrites; scale-a = scale-b = 1; trans-a (descriptor A only) = 0.
  std::string text = "{\n.reg .pred p;\nsetp.ne.b32 p, " + scale_d + ", 0;\nwgmma.mma_async.sync.aligned.m64n" +
                     std::to_string(n) + "k16.f32." + ab + "." + ab + " " + asm_reg_list(0, nacc) + ", " + a_text + ", " +
                     b_text + ", p, 1, 1, " + (a.desc ? "0, " : "") + (trans_b ? "1" : "0") + ";\n}";
  std::vector<llvm::Type*> types(nacc, e.f32());
  llvm::Value* r = asm_call(e, llvm::StructType::get(e.ctx, types), args, text, constraints);
  std::vector<llvm::Value*> out(nacc);
  for (int i = 0; i < nacc; ++i) out[i] = e.b.CreateExtractValue(r, static_cast<unsigned>(i));
  return out;
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

void wgmma_wait(Emitter& e, std::vector<llvm::Value*>& vals) { through_asm(e, vals, "wgmma.wait_group.sync.aligned 0;"); }

void fence_proxy_async(Emitter& e) {
  std::vector<llvm::Value*> none;
  through_asm(e, none, "fence.proxy.async.shared::cta;");
}

}  // namespace flashjit::tile

// compiler/tile/tensor_core's issued-but-not-waited products (mma_abt_async, wait), on the emitted
// IR: two products in flight, the first waited for with one group still pending. wgmma's
// accumulators may be read only after the wait_group that covers them (PTX ISA §9.7.15.7), so every
// use of a product's values must come from the wait that names them, never from the wgmma itself.
#include <catch2/catch.hpp>

#include <memory>

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>

#include "compiler/tile/tensor_core.hpp"

using namespace flashjit;

namespace {

// The asm text of the inline-asm call `v` comes from (through extractvalue), or "".
std::string asm_of(llvm::Value* v) {
  if (auto* x = llvm::dyn_cast<llvm::ExtractValueInst>(v)) v = x->getAggregateOperand();
  if (auto* c = llvm::dyn_cast<llvm::CallInst>(v))
    if (auto* a = llvm::dyn_cast<llvm::InlineAsm>(c->getCalledOperand())) return a->getAsmString();
  return "";
}

// A function k(i32 smem, ptr out) to emit into, with a tensor core of 64 × 64 tiles.
struct Emitted {
  llvm::LLVMContext ctx;
  llvm::Module module{"async", ctx};
  llvm::Function* fn = llvm::Function::Create(
      llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {llvm::Type::getInt32Ty(ctx), llvm::PointerType::get(ctx, 0)},
                              false),
      llvm::GlobalValue::ExternalLinkage, "k", module);
  tile::Emitter e{module, fn};
  std::unique_ptr<tile::TensorCore> tc;

  explicit Emitted(bool warpgroup) {
    e.b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
    tile::MmaShape shape;
    shape.rows = 64, shape.cols = 64, shape.k_steps = 4, shape.out_tiles = 8;
    tc = tile::make_tensor_core(warpgroup, shape, e.c32(0), e.c32(0));
    tc->prepare(e, {fn->getArg(0), 64});
  }
  tile::SmemTile tile_at(int offset) { return {e.b.CreateAdd(fn->getArg(0), e.c32(offset)), 64}; }
};

}  // namespace

TEST_CASE("tile: a product issued ahead is read only through the wait that covers it", "[tile][wgmma]") {
  Emitted k(/*warpgroup=*/true);
  tile::Emitter& e = k.e;
  llvm::Function* fn = k.fn;
  tile::RegTile s = k.tc->mma_abt_async(e, k.tile_at(8192));
  tile::RegTile dp = k.tc->mma_abt_async(e, k.tile_at(16384));
  k.tc->wait(e, s, 1);
  e.b.CreateStore(s[0][7][3], fn->getArg(1));
  k.tc->wait(e, dp, 0);
  e.b.CreateStore(dp[0][0][0], e.b.CreateGEP(e.f32(), fn->getArg(1), e.c32(1)));
  e.b.CreateRetVoid();
  REQUIRE_FALSE(llvm::verifyFunction(*fn, &llvm::errs()));

  // In program order: S's four wgmma and its commit, dP's, then wait_group 1, then wait_group 0.
  std::vector<std::string> order;
  for (llvm::Instruction& i : fn->getEntryBlock())
    if (auto* c = llvm::dyn_cast<llvm::CallInst>(&i))
      if (auto* a = llvm::dyn_cast<llvm::InlineAsm>(c->getCalledOperand())) {
        const std::string& t = a->getAsmString();
        if (t.find("wgmma.mma_async") != std::string::npos) order.push_back("mma");
        else if (t.find("commit_group") != std::string::npos) order.push_back("commit");
        else if (t.find("wait_group") != std::string::npos) order.push_back(t);
      }
  const std::vector<std::string> want = {"mma", "mma", "mma", "mma", "commit", "mma", "mma", "mma", "mma", "commit",
                                         "wgmma.wait_group.sync.aligned 1;", "wgmma.wait_group.sync.aligned 0;"};
  CHECK(order == want);

  // The stored values come out of their waits, and each wait carries only its own product.
  std::vector<llvm::StoreInst*> stores;
  for (llvm::Instruction& i : fn->getEntryBlock())
    if (auto* st = llvm::dyn_cast<llvm::StoreInst>(&i)) stores.push_back(st);
  REQUIRE(stores.size() == 2);
  CHECK(asm_of(stores[0]->getValueOperand()) == "wgmma.wait_group.sync.aligned 1;");
  CHECK(asm_of(stores[1]->getValueOperand()) == "wgmma.wait_group.sync.aligned 0;");
  for (int k = 0; k < 2; ++k) {
    auto* wait = llvm::cast<llvm::CallInst>(llvm::cast<llvm::ExtractValueInst>(stores[k]->getValueOperand())->getAggregateOperand());
    CHECK(wait->arg_size() == 32);  // 64 × 64 fp32 over 128 threads
    for (llvm::Value* a : wait->args()) CHECK_THAT(asm_of(a), Catch::Contains("wgmma.mma_async"));
  }
}

TEST_CASE("tile: with mma.sync an issued product is complete at once", "[tile]") {
  Emitted k(/*warpgroup=*/false);
  tile::Emitter& e = k.e;
  llvm::Function* fn = k.fn;
  tile::RegTile s = k.tc->mma_abt_async(e, k.tile_at(8192));
  const size_t before = fn->getEntryBlock().size();
  k.tc->wait(e, s, 0);
  CHECK(fn->getEntryBlock().size() == before);  // nothing to wait for
  for (llvm::Instruction& i : fn->getEntryBlock())
    if (auto* c = llvm::dyn_cast<llvm::CallInst>(&i))
      if (auto* a = llvm::dyn_cast<llvm::InlineAsm>(c->getCalledOperand()))
        CHECK_THAT(a->getAsmString(), !Catch::Contains("wgmma"));
}

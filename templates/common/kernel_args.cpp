#include "templates/common/kernel_args.hpp"

#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>

#include "templates/common/backward_abi.hpp"
#include "templates/common/forward_abi.hpp"

namespace flashjit {

llvm::Function* declare_kernel(llvm::Module& m, const AnalyzedSpec& spec, const LaunchBounds& bounds, KernelTail tail,
                               const std::string& name, int tensor_maps) {
  auto& ctx = m.getContext();
  auto* gptr = llvm::PointerType::get(ctx, 1);
  auto* i32 = llvm::Type::getInt32Ty(ctx);
  std::vector<llvm::Type*> params(kParamCount);
  for (int i = kParamQ; i <= kParamLse; ++i) params[i] = gptr;
  for (int i = 0; i < 12; ++i) params[kParamStrides + i] = llvm::Type::getInt64Ty(ctx);
  params[kParamSeqQ] = params[kParamSeqKv] = params[kParamGroup] = params[kParamRangeOk] = params[kParamSplits] = i32;
  params[kParamPartialO] = params[kParamPartialLse] = params[kParamCuSeqlensQ] = params[kParamCuSeqlensKv] = gptr;
  params[kParamBlockTable] = params[kParamSeqUsedKv] = params[kParamTileCounter] = gptr;
  params[kParamPageSize] = params[kParamPagesPerSeq] = params[kParamGridHeads] = params[kParamGridBatch] = i32;
  params[kParamScaleLog2] = llvm::Type::getFloatTy(ctx);
  for (const dsl::Param& p : spec.dsl.params) params.push_back(p.type == dsl::Type::F32 ? llvm::Type::getFloatTy(ctx) : i32);
  for (size_t t = 0; t < spec.dsl.tensors.size(); ++t) params.push_back(gptr);
  const size_t tail_at = params.size();
  if (tail == KernelTail::block_map) {
    params.push_back(gptr);  // tiles
    params.push_back(gptr);  // counts
  } else if (tail == KernelTail::backward) {
    for (int i = kBwdDo; i <= kBwdMapKvCounts; ++i) params.push_back(gptr);
    for (int i = 0; i < 12; ++i) params.push_back(llvm::Type::getInt64Ty(ctx));
  }
  const size_t maps_at = params.size();
  for (int i = 0; i < tensor_maps; ++i) params.push_back(llvm::PointerType::get(ctx, 0));
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), params, false);
  auto* fn = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, name, m);
  fn->setCallingConv(llvm::CallingConv::PTX_Kernel);
  // A byval aggregate becomes a `.param .align 64 .b8 [128]` parameter, the layout a CUtensorMap
  // argument has (the driver copies its 128 bytes at launch).
  auto* map_type = llvm::ArrayType::get(llvm::Type::getInt8Ty(ctx), kTensorMapBytes);
  for (int i = 0; i < tensor_maps; ++i) {
    const unsigned at = unsigned(maps_at + i);
    fn->addParamAttr(at, llvm::Attribute::getWithByValType(ctx, map_type));
    fn->addParamAttr(at, llvm::Attribute::getWithAlignment(ctx, llvm::Align(64)));
  }
  for (int i = kParamQ; i <= kParamV; ++i) {
    fn->addParamAttr(i, llvm::Attribute::NoAlias);
    fn->addParamAttr(i, llvm::Attribute::ReadOnly);
  }
  fn->addParamAttr(kParamO, llvm::Attribute::NoAlias);
  fn->addParamAttr(kParamLse, llvm::Attribute::NoAlias);
  fn->addParamAttr(kParamPartialO, llvm::Attribute::NoAlias);
  fn->addParamAttr(kParamPartialLse, llvm::Attribute::NoAlias);
  for (int i : {kParamCuSeqlensQ, kParamCuSeqlensKv, kParamBlockTable, kParamSeqUsedKv})
    fn->addParamAttr(i, llvm::Attribute::ReadOnly);
  if (tail == KernelTail::backward) {
    // The forward's outputs are the backward's inputs; dq, dk, dv and delta are written.
    fn->addParamAttr(kParamO, llvm::Attribute::ReadOnly);
    fn->addParamAttr(kParamLse, llvm::Attribute::ReadOnly);
    for (int i = kBwdDo; i <= kBwdMapKvCounts; ++i) fn->addParamAttr(unsigned(tail_at + i), llvm::Attribute::NoAlias);
    fn->addParamAttr(unsigned(tail_at + kBwdDo), llvm::Attribute::ReadOnly);
  }
  // Launch bounds (NVVM IR spec, "nvvm.annotations": maxntidx) let ptxas budget registers per thread.
  llvm::NamedMDNode* ann = m.getOrInsertNamedMetadata("nvvm.annotations");
  auto note = [&](const char* key, int value) {
    ann->addOperand(llvm::MDNode::get(ctx, {llvm::ValueAsMetadata::get(fn), llvm::MDString::get(ctx, key),
                                            llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(i32, value))}));
  };
  note("kernel", 1);
  note("maxntidx", bounds.threads);
  // .minnctapersm: the occupancy the plan budgets registers for. Without it ptxas picks its own
  // budget, which can cost a CTA per SM or spill (docs/perf-notes.md §7).
  note("minctasm", bounds.min_ctas_per_sm);
  return fn;
}

std::string param_symbol(const llvm::Function* fn, unsigned i) {
  return fn->getName().str() + "_param_" + std::to_string(i);
}

llvm::Value* tail_arg(llvm::Function* fn, const AnalyzedSpec& spec, int i) {
  return fn->getArg(unsigned(kParamCount + spec.dsl.params.size() + spec.dsl.tensors.size() + i));
}

ExprInputs expr_inputs(tile::Emitter& e, const AnalyzedSpec& spec, llvm::Value* batch, llvm::Value* head,
                       llvm::Value* head_kv, llvm::Value* heads_q, llvm::Value* batches) {
  auto& B = e.b;
  llvm::Function* fn = e.fn;
  ExprInputs ex;
  ex.b = batch;
  ex.h = head;
  ex.h_kv = head_kv;
  ex.seq_q = fn->getArg(kParamSeqQ);
  ex.seq_kv = fn->getArg(kParamSeqKv);
  ex.heads_q = heads_q ? heads_q
                       : B.CreateCall(llvm::Intrinsic::getDeclaration(&e.module, llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y));
  if (!batches)
    batches = B.CreateCall(llvm::Intrinsic::getDeclaration(&e.module, llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_z));
  int arg = kParamCount;
  for (size_t i = 0; i < spec.dsl.params.size(); ++i) ex.params.push_back(fn->getArg(arg++));
  for (const dsl::TensorDecl& t : spec.dsl.tensors) {
    ExprInputs::TensorArg ta;
    ta.ptr = fn->getArg(arg++);
    ta.elem = t.elem;
    for (const dsl::Extent& d : t.dims) {
      using K = dsl::Extent::Kind;
      switch (d.kind) {
        case K::Batch: ta.extents.push_back(batches); break;
        case K::HeadsQ: ta.extents.push_back(ex.heads_q); break;
        case K::HeadsKv: ta.extents.push_back(B.CreateUDiv(ex.heads_q, fn->getArg(kParamGroup))); break;
        case K::SeqQ: ta.extents.push_back(ex.seq_q); break;
        case K::SeqKv: ta.extents.push_back(ex.seq_kv); break;
        case K::Fixed: ta.extents.push_back(e.c32(static_cast<int>(d.size))); break;
      }
    }
    ex.tensors.push_back(ta);
  }
  return ex;
}

KvBoundsInputs kv_bounds_inputs(tile::Emitter& e, const ExprInputs& ex, llvm::Value* q_first, llvm::Value* q_last) {
  KvBoundsInputs kb;
  kb.q_first = q_first;
  kb.q_last = q_last;
  kb.b = ex.b;
  kb.h = ex.h;
  kb.h_kv = ex.h_kv;
  kb.seq_q = ex.seq_q;
  kb.seq_kv = ex.seq_kv;
  kb.params = ex.params;
  kb.range_ok = e.b.CreateICmpNE(e.fn->getArg(kParamRangeOk), e.c32(0));
  return kb;
}

BlockMapRow block_map_row(tile::Emitter& e, const AnalyzedSpec& spec, const TileConfig& config, const ExprInputs& ex,
                          llvm::Value* q_tile) {
  auto& B = e.b;
  const BlockMapPolicy& policy = spec.block_map;
  llvm::Value* tiles = tail_arg(e.fn, spec, 0);
  llvm::Value* counts = tail_arg(e.fn, spec, 1);
  const int BM = config.block_m, BN = config.block_n;
  llvm::Value* q_tiles = B.CreateUDiv(B.CreateAdd(ex.seq_q, e.c32(BM - 1)), e.c32(BM));
  llvm::Value* kv_tiles = B.CreateUDiv(B.CreateAdd(ex.seq_kv, e.c32(BN - 1)), e.c32(BN));
  llvm::Value* map = policy.per_batch ? ex.b : e.c32(0);
  if (policy.per_head) map = B.CreateAdd(B.CreateMul(map, ex.heads_q), ex.h);
  llvm::Value* row = B.CreateAdd(B.CreateMul(B.CreateZExt(map, e.i64()), B.CreateZExt(q_tiles, e.i64())),
                                 B.CreateZExt(q_tile, e.i64()));
  return {B.CreateGEP(e.i32(), counts, row),
          B.CreateGEP(e.i32(), tiles, B.CreateMul(row, B.CreateZExt(kv_tiles, e.i64())))};
}

}  // namespace flashjit

// The short optimisation pipeline (compiler/codegen/emit.cpp) against LLVM's whole O3 pipeline:
// the passes it leaves out must change no kernel, so each template and form is compiled under
// both and the PTX compared byte for byte.
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <catch2/catch.hpp>

#include "compiler/codegen/emit.hpp"
#include "compiler/codegen/target.hpp"
#include "compiler/pipeline.hpp"
#include "tests/codegen_matrix.hpp"

using namespace flashjit;

namespace {

struct Case {
  const char* name;
  AttentionSpec spec;
  KernelRequest request;
};

KernelRequest request(const char* arch, const char* template_name = "attention_fwd") {
  KernelRequest r;
  r.template_name = template_name;
  r.target = Target{arch};
  return r;
}

std::vector<Case> cases() {
  const AttentionSpec causal64 = test::make(DType::bf16, 64, "causal");
  const AttentionSpec causal128 = test::make(DType::bf16, 128, "causal");
  AttentionSpec document = test::make(DType::bf16, 64, "document(doc)");
  document.tensors = {{"doc", ScalarType::i32, {"seq_kv"}}};
  AttentionSpec softcap = test::make(DType::f16, 128, "window(256, 0)");
  softcap.score = "softcap * tanh(score / softcap)";
  softcap.params = {{"softcap", ScalarType::f32, 30}};
  AttentionSpec alibi = test::make(DType::bf16, 96, "causal");
  alibi.score = "score - slope[h] * abs(q - kv)";
  alibi.tensors = {{"slope", ScalarType::f32, {"heads_q"}}};

  std::vector<Case> out;
  out.push_back({"CTA-wide, TMA", causal64, request("sm_90a")});
  Case cp_async{"CTA-wide, cp.async", causal64, request("sm_90a")};
  cp_async.request.target.tma = false;
  out.push_back(cp_async);
  out.push_back({"producer", causal128, request("sm_90a")});
  out.push_back({"producer, d = 256", test::make(DType::bf16, 256, "none"), request("sm_90a")});
  out.push_back({"block map", document, request("sm_90a")});
  out.push_back({"score modifier, fp16", softcap, request("sm_90a")});
  out.push_back({"tensor read, d = 96", alibi, request("sm_90a")});
  Case sync{"mma.sync on sm_90a", causal128, request("sm_90a")};
  sync.request.target.allow_wgmma = false;
  out.push_back(sync);
  out.push_back({"sm_80", softcap, request("sm_80")});
  Case split{"split-KV", causal128, request("sm_90a")};
  split.request.target.split_kv = true;
  out.push_back(split);
  Case split80{"split-KV, sm_80", softcap, request("sm_80")};
  split80.request.target.split_kv = true;
  out.push_back(split80);
  Case serving{"split-KV, varlen, paged", softcap, request("sm_90a")};
  serving.request.target.split_kv = serving.request.target.varlen = serving.request.target.paged = true;
  out.push_back(serving);
  Case varlen{"varlen", causal64, request("sm_90a")};
  varlen.request.target.varlen = true;
  out.push_back(varlen);
  Case paged{"paged, GQA packed", test::make(DType::bf16, 128, "none"), request("sm_90a")};
  paged.request.target.paged = true;
  paged.request.target.page_size = 16;
  paged.request.target.pack_gqa = 4;
  out.push_back(paged);
  // Head dims off the 64-column panels: partial panels, small tiles, d_qk != d_v.
  AttentionSpec narrow = test::make(DType::bf16, 8, "causal", 80);
  narrow.score = "30 * tanh(score / 30)";
  out.push_back({"d = 8/80", narrow, request("sm_90a")});
  out.push_back({"d = 32", test::make(DType::bf16, 32, "causal"), request("sm_90a")});
  out.push_back({"d = 16, sm_80", test::make(DType::bf16, 16, "causal"), request("sm_80")});
  out.push_back({"backward", causal128, request("sm_90a", "attention_bwd")});
  out.push_back({"backward, d = 16", test::make(DType::bf16, 16, "causal"), request("sm_90a", "attention_bwd")});
  out.push_back({"backward, d = 72, sm_80", test::make(DType::bf16, 72, "causal"), request("sm_80", "attention_bwd")});
  out.push_back({"backward, d = 160, sm_80", test::make(DType::bf16, 160, "none"), request("sm_80", "attention_bwd")});
  out.push_back({"backward, block map", document, request("sm_90a", "attention_bwd")});
  out.push_back({"backward, sm_80", causal64, request("sm_80", "attention_bwd")});
  return out;
}

// The planned kernel's module through `pipeline`, as compile_planned takes it, to PTX.
std::string ptx(const PlannedKernel& planned, codegen::OptPipeline pipeline) {
  llvm::LLVMContext ctx;
  codegen::install_diagnostics(ctx);
  std::unique_ptr<llvm::TargetMachine> tm = codegen::make_target_machine(planned.target.arch);
  llvm::Module module("flashjit_" + planned.key.hash, ctx);
  module.setTargetTriple(tm->getTargetTriple().str());
  module.setDataLayout(tm->createDataLayout());
  planned.plan->emit(module, planned.entry);
  codegen::verify_module(module);
  codegen::optimize_module(module, *tm, pipeline);
  return codegen::emit_ptx(module, *tm);
}

}  // namespace

TEST_CASE("opt pipeline: the short pipeline gives the PTX of LLVM's O3 for every template and form", "[pipeline]") {
  for (const Case& c : cases()) {
    INFO(c.name);
    const PlannedKernel planned = plan_kernel(analyze_spec(c.spec), c.request);
    const std::string fast = ptx(planned, codegen::OptPipeline::short_o3);
    CHECK_THAT(fast, Catch::Contains(".entry " + planned.entry));
    CHECK(fast == ptx(planned, codegen::OptPipeline::o3));
  }
}

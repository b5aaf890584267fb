// The backward's dK/dV kernel with a producer warpgroup (BackwardPass::producer,
// FLASHJIT_BWD_PRODUCER=on): the plan, where it is refused and why, and the PTX's hand-over.
#include <catch2/catch.hpp>

#include <regex>

#include "compiler/pipeline.hpp"
#include "templates/bwd/plan.hpp"
#include "templates/common/arch_limits.hpp"
#include "templates/fwd/plan.hpp"
#include "tests/codegen_matrix.hpp"
#include "tests/support.hpp"

using namespace flashjit;

namespace {

Target producer(const char* arch = "sm_90a") {
  Target t{arch};
  t.backward_producer = true;
  return t;
}

// The PTX of one entry: from its .entry line to the next.
std::string entry_body(const std::string& ptx, const std::string& name) {
  const size_t at = ptx.find(".entry " + name + "(");
  REQUIRE(at != std::string::npos);
  const size_t next = ptx.find(".entry ", at + 1);
  return ptx.substr(at, next == std::string::npos ? std::string::npos : next - at);
}

size_t count(const std::string& text, const std::regex& re) {
  return size_t(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

}  // namespace

TEST_CASE("backward producer: d=128 adds a producer warpgroup, its mbarriers and two dS buffers",
          "[pipeline][backward]") {
  const AnalyzedSpecPtr s = analyze_spec(test::make(DType::bf16, 128, "causal"));
  const BackwardPlan p = plan_backward(s, {64, 128, 8, 2}, producer());
  INFO(p.describe());
  CHECK(p.kv.producer);
  CHECK(p.kv_producer_note.empty());
  CHECK(p.kv.compute_threads == 256);
  CHECK(p.kv.threads == 384);
  CHECK(p.kv.min_ctas_per_sm == 1);
  // 384 × 168 = 256 × 240 + 128 × 24: the launch's registers, moved by setmaxnreg.
  CHECK(p.kv.compute_registers == 240);
  CHECK(p.kv.producer_registers == 24);
  CHECK(128 * p.kv.producer_registers + p.kv.compute_threads * p.kv.compute_registers <= 65536);
  // dQ summed here, dSᵀ in two buffers, then dQ's blocks, then full and empty per stage.
  CHECK(p.fused_dq);
  CHECK(p.kv.ds_buffers == 2);
  CHECK(p.kv.ds % 1024 == 0);
  CHECK(p.kv.dq >= p.kv.ds + 2 * 128 * 64 * 2);
  CHECK(p.kv.barriers % 8 == 0);
  CHECK(p.kv.barriers >= p.kv.dq);
  CHECK(p.kv.barriers + 16 * p.kv.stages + kWgmmaAlignSlack <= p.kv.shared_bytes);
  CHECK(p.kv.shared_bytes <= max_shared_bytes("sm_90a"));
  CHECK_THAT(p.describe(), Catch::Contains(" producer") && Catch::Contains("dS x2"));
  // The dQ kernel is the same with it or without.
  const BackwardPlan off = plan_backward(s, {64, 128, 8, 2}, Target{"sm_90a"});
  CHECK(off.q.threads == p.q.threads);
  CHECK(off.q.shared_bytes == p.q.shared_bytes);
  CHECK_FALSE(off.kv.producer);
  CHECK(off.kv.threads == 256);
  CHECK(off.kv.ds_buffers == 1);
  CHECK(off.kv_producer_note == "FLASHJIT_BWD_PRODUCER=off");
}

TEST_CASE("backward producer: refused where it does not apply, saying why", "[pipeline][backward]") {
  auto note = [](const AttentionSpec& spec, TileConfig c, const Target& t) {
    const BackwardPlan p = plan_backward(analyze_spec(spec), c, t);
    CHECK(p.kv.producer == p.kv_producer_note.empty());
    CHECK(p.kv.threads == (p.kv.producer ? 384 : 32 * c.num_warps));
    return p.kv_producer_note;
  };
  const AttentionSpec d128 = test::make(DType::bf16, 128, "causal");
  CHECK(note(d128, {64, 128, 8, 2}, producer()).empty());
  CHECK_THAT(note(d128, {32, 128, 8, 1}, producer()), Catch::Contains("more than one CTA"));
  CHECK_THAT(note(d128, {32, 64, 4, 2}, producer()), Catch::Contains("num_warps 8"));
  CHECK_THAT(note(d128, {64, 128, 8, 2}, producer("sm_80")), Catch::Contains("wgmma"));
  Target sync = producer();
  sync.allow_wgmma = false;
  CHECK_THAT(note(d128, {64, 128, 8, 2}, sync), Catch::Contains("wgmma"));
  Target driver = producer();
  driver.moves_registers = false;
  CHECK_THAT(note(d128, {64, 128, 8, 2}, driver), Catch::Contains("setmaxnreg"));
  CHECK_THAT(note(test::make(DType::bf16, 96, "causal"), {32, 128, 8, 2}, producer()), Catch::Contains("64 or 128"));
  CHECK_THAT(note(d128, {128, 128, 8, 1}, producer()), Catch::Contains("accumulator registers"));
  // Two launches for dK and dV at d = 256 (no two-warpgroup split on this target).
  CHECK_THAT(note(test::make(DType::bf16, 256, "causal"), {32, 128, 8, 1}, producer()),
             Catch::Contains("two launches"));
  // d = 64 in one stage of 32 queries: shared memory for several CTAs per SM.
  CHECK_THAT(note(test::make(DType::bf16, 64, "none"), {32, 128, 8, 1}, producer()),
             Catch::Contains("more than one CTA"));
}

TEST_CASE("backward producer: the dK/dV kernels hand stages over by mbarriers, not CTA barriers",
          "[codegen][backward]") {
  KernelRequest request;
  request.template_name = "attention_bwd";
  request.target = producer();
  request.config = TileConfig{64, 128, 8, 2};
  const CompiledKernel k = compile_planned(
      plan_kernel(analyze_spec(test::make(DType::bf16, 128, "window(1023, 0) && causal")), request), StageOptions{});
  INFO(k.description);
  CHECK(k.threads == 384);
  const std::regex cta_barrier(R"(\sbar(rier)?\.sync(\.aligned)?\s+0;)");
  for (const std::string& name : {k.entry, k.entry + "_kv"}) {
    const std::string body = entry_body(k.ptx, name);
    INFO(name);
    CHECK_THAT(body, Catch::Contains("setmaxnreg.dec.sync.aligned.u32 24;") &&
                         Catch::Contains("setmaxnreg.inc.sync.aligned.u32 240;") &&
                         Catch::Contains("mbarrier.try_wait.parity") &&
                         Catch::Contains("cp.async.mbarrier.arrive.noinc"));
    // One CTA barrier, before the warpgroups part (the mbarriers' initialisation, the resident tiles).
    CHECK(count(body, cta_barrier) == 1);
  }
  // dQ summed in the first: dSᵀ published to the compute warps only (named barrier 3 of 256).
  CHECK(std::regex_search(entry_body(k.ptx, k.entry), std::regex(R"(bar(rier)?\.sync(\.aligned)?\s+3,\s*256;)")));
  // The dQ kernel keeps its CTA-wide pipeline.
  CHECK_THAT(entry_body(k.ptx, k.entry + "_dq"), !Catch::Contains("setmaxnreg"));
}

TEST_CASE("backward producer: with dK and dV by warpgroup, P alternates between two buffers", "[pipeline][backward]") {
  Target t = producer();
  t.backward_warpgroups = true;
  const BackwardPlan p = plan_backward(analyze_spec(test::make(DType::bf16, 256, "causal")), {32, 64, 8, 2}, t);
  INFO(p.describe());
  CHECK(p.warpgroup_split);
  CHECK(p.kv.producer);
  CHECK(p.kv.threads == 384);
  CHECK(p.kv.p_buffers() == 2);
  CHECK(p.kv.p_share + 2 * 64 * 32 * 4 <= p.kv.barriers);
  CHECK(p.kv.barriers + 16 * p.kv.stages + kWgmmaAlignSlack <= p.kv.shared_bytes);
  t.backward_producer = false;
  const BackwardPlan off = plan_backward(analyze_spec(test::make(DType::bf16, 256, "causal")), {32, 64, 8, 2}, t);
  CHECK(off.kv.p_buffers() == 1);
  CHECK(off.kv.threads == 256);
  // Partial 64-column panels keep the CTA-wide pipeline.
  t.backward_producer = true;
  CHECK_THAT(
      plan_backward(analyze_spec(test::make(DType::bf16, 256, "causal", 192)), {32, 64, 8, 2}, t).kv_producer_note,
      Catch::Contains("both 256"));
}

TEST_CASE("backward producer: the dK/dV kernels assemble for sm_90a with no spills", "[codegen][ptxas][backward]") {
  const std::string ptxas = test::ptxas_path();
  test::TempDir dir;
  Target t = producer();
  t.backward_warpgroups = true;
  AttentionSpec doc = test::make(DType::bf16, 256, "causal && document(doc)");
  doc.tensors = {{"doc", ScalarType::i32, {"seq_kv"}}};
  AttentionSpec doc128 = doc;
  doc128.head_dim_qk = doc128.head_dim_v = 128;
  doc128.dtype = DType::f16;
  const std::vector<std::pair<AttentionSpec, TileConfig>> cases = {
      {test::make(DType::bf16, 256, "none"), {32, 64, 8, 2}},
      {test::make(DType::f16, 256, "window(256, 0)"), {32, 64, 8, 2}},
      {doc, {32, 64, 8, 2}},
      {test::with_score(test::make(DType::bf16, 256, "causal"), "30 * tanh(score / 30)"), {32, 64, 8, 2}},
      {test::make(DType::bf16, 64, "causal"), {128, 128, 8, 3}},
      {test::make(DType::bf16, 128, "none"), {64, 128, 8, 1}},
      {doc128, {64, 128, 8, 2}},
  };
  for (const auto& [spec, config] : cases) {
    KernelRequest request;
    request.template_name = "attention_bwd";
    request.target = t;
    request.config = config;
    const CompiledKernel k = compile_planned(plan_kernel(analyze_spec(spec), request), StageOptions{});
    INFO(spec.canonical() << " " << k.description);
    CHECK_THAT(k.description, Catch::Contains(" producer"));
    CHECK(count(entry_body(k.ptx, k.entry), std::regex(R"(\sbar(rier)?\.sync(\.aligned)?\s+0;)")) == 1);
    if (ptxas.empty()) continue;
    auto r = test::assemble(ptxas, dir.path, k);
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK_FALSE(test::spills(r.output));
    CHECK_THAT(r.output, !Catch::Contains("serialized"));
  }
  if (ptxas.empty()) SKIP_TEST("ptxas not found: the PTX was checked but not assembled");
}

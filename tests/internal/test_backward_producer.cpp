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
  // 32-query tiles leave shared memory for two CTAs per SM, but their registers (160 estimated, 222
  // under ptxas 13) allow one: the producer's registers take no CTA away.
  CHECK(note(d128, {32, 128, 8, 1}, producer()).empty());
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
  CHECK(note(test::make(DType::bf16, 64, "none"), {32, 128, 8, 1}, producer()).empty());
}

TEST_CASE("backward producer: at d_qk = 64 the kernel with it also adds dQ, on 64-query tiles",
          "[pipeline][backward]") {
  const AnalyzedSpecPtr s = analyze_spec(test::make(DType::bf16, 64, "causal"));
  const BackwardPlan p = plan_backward(s, {64, 128, 8, 2}, producer());
  INFO(p.describe());
  CHECK(p.kv.producer);
  CHECK(p.fused_dq);
  CHECK(p.kv.ds_buffers == 2);
  CHECK(p.kv.shared_bytes <= max_shared_bytes("sm_90a"));
  // Without the producer, or with 128-query tiles (which spill), dQ keeps its own kernel.
  const BackwardPlan off = plan_backward(s, {64, 128, 8, 2}, Target{"sm_90a"});
  CHECK_FALSE(off.fused_dq);
  CHECK_THAT(off.fused_dq_note, Catch::Contains("producer warpgroup and 64-query tiles"));
  const BackwardPlan wide = plan_backward(s, {128, 128, 8, 2}, producer());
  CHECK(wide.kv.producer);
  CHECK_FALSE(wide.fused_dq);
  // d_v = 128 beside it as well.
  CHECK(plan_backward(analyze_spec(test::make(DType::bf16, 64, "none", 128)), {64, 128, 8, 2}, producer()).fused_dq);
}

TEST_CASE("backward heuristic for a shape: query rows per key tile choose the d <= 64 kernel", "[pipeline][backward]") {
  auto walk = [](const AttentionSpec& spec, int64_t sq, int64_t skv, std::vector<ParamValue> params = {}) {
    return mean_query_walk(*analyze_spec(spec), sq, skv, params);
  };
  CHECK(walk(test::make(DType::bf16, 64, "none"), 16384, 16384) == 16384.0);
  // Causal: key tile j of 128 sees the queries from 128 j on, 8256 on average over 128 tiles.
  CHECK(walk(test::make(DType::bf16, 64, "causal"), 16384, 16384) == Approx(8256.0));
  const std::optional<double> window = walk(test::make(DType::bf16, 64, "window(1023, 0) && causal"), 16384, 16384);
  REQUIRE(window);
  CHECK(*window > 1000);
  CHECK(*window < 1200);
  AttentionSpec p = test::make(DType::bf16, 64, "kv <= q && q - kv < w");
  p.params = {{"w", ScalarType::i32, 0}};
  CHECK(*walk(p, 16384, 16384, {{"w", 4096}}) > *walk(p, 16384, 16384, {{"w", 256}}));
  AttentionSpec doc = test::make(DType::bf16, 64, "document(doc)");
  doc.tensors = {{"doc", ScalarType::i32, {"seq_kv"}}};
  CHECK_FALSE(walk(doc, 16384, 16384));                                         // a block map: no closed form to count
  CHECK_FALSE(walk(test::make(DType::bf16, 64, "kv <= q + h"), 16384, 16384));  // reads the head

  const Target t = producer();
  auto pick = [](const AttentionSpec& spec, const Target& target, int64_t seq, std::string* why = nullptr) {
    ProblemShape shape;
    shape.seq_q = shape.seq_kv = seq;
    const AnalyzedSpecPtr a = analyze_spec(spec);
    const std::string chosen = backward_heuristic_for(a, target, shape, {}, why).str();
    return std::make_pair(chosen, backward_heuristic(*a, target, nullptr).str());
  };
  const AttentionSpec d64 = test::make(DType::bf16, 64, "none");
  std::string why;
  const auto [wide, table] = pick(d64, t, 16384, &why);
  CHECK(wide == "bm64_bn128_w8_s2");
  CHECK(wide != table);
  CHECK_THAT(why, Catch::Contains("16384 query rows per key tile"));
  CHECK(pick(d64, t, 4096).first == wide);
  CHECK(pick(d64, t, 2048).first == table);
  CHECK(pick(test::make(DType::bf16, 64, "causal"), t, 8192).first == wide);   // a walk of 4160
  CHECK(pick(test::make(DType::bf16, 64, "causal"), t, 4096).first == table);  // 2112
  CHECK(pick(doc, t, 16384).first == table);                                   // no walk known
  CHECK(pick(d64, Target{"sm_90a"}, 16384).first == table);                    // no producer
  const auto sm80 = pick(d64, producer("sm_80"), 16384);
  CHECK(sm80.first == sm80.second);
  const auto soft = pick(test::with_score(d64, "30 * tanh(score / 30)"), t, 16384);
  CHECK(soft.first == soft.second);
  const auto d128 = pick(test::make(DType::bf16, 128, "none"), t, 16384);
  CHECK(d128.first == d128.second);
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
      {test::make(DType::bf16, 64, "none"), {64, 128, 8, 2}},
      {test::with_score(test::make(DType::f16, 64, "causal"), "30 * tanh(score / 30)"), {64, 128, 8, 1}},
      {test::make(DType::bf16, 64, "causal", 128), {64, 128, 8, 2}},
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
    test::check_assembles(ptxas, dir.path, k);
  }
  if (ptxas.empty()) SKIP_TEST("ptxas not found: the PTX was checked but not assembled");
}

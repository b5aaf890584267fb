// The backward's dK/dV kernel with its two warpgroups on one key tile (BackwardPlan::
// warpgroup_split, FLASHJIT_BWD_WARPGROUPS=on): the plan, what it refuses, the heuristic with the
// knob, and its PTX under ptxas.
#include <catch2/catch.hpp>

#include <optional>
#include <regex>

#include "compiler/pipeline.hpp"
#include "templates/bwd/plan.hpp"
#include "tests/codegen_matrix.hpp"
#include "tests/support.hpp"

using namespace flashjit;

namespace {

Target warpgroups(const char* arch = "sm_90a") {
  Target t{arch};
  t.backward_warpgroups = true;
  return t;
}

}  // namespace

TEST_CASE("backward warpgroups: 64 keys on 8 warps split dV and dK between the warpgroups", "[pipeline][backward]") {
  const AnalyzedSpecPtr d256 = analyze_spec(test::make(DType::bf16, 256, "causal"));
  const BackwardPlan p = plan_backward(d256, {32, 64, 8, 2}, warpgroups());
  CHECK(p.warpgroup_split);
  CHECK_FALSE(p.split_kv);
  CHECK_FALSE(p.fused_dq);
  CHECK(p.kv.roles == 2);
  CHECK(p.kv.threads == 256);
  CHECK(p.kv.m_tiles == 1);  // each warpgroup's four warps hold the 64 rows
  CHECK(p.kv.wgmma);
  CHECK_FALSE(p.kv.dp_early);
  // P's hand-over, rows × cols fp32, after the stages' LSE and D and inside the launch's bytes.
  CHECK(p.kv.p_share >= p.kv.stats + p.kv.stages * p.kv.stats_stage);
  CHECK(p.kv.p_share % 16 == 0);
  CHECK(p.kv.p_share + 64 * 32 * 4 <= p.kv.shared_bytes);
  CHECK_THAT(p.describe(), Catch::Contains("dK,dV by warpgroup"));
  CHECK_THAT(p.fused_dq_note, Catch::Contains("two warpgroups"));
  const BackwardEntries e = backward_entries(p, "k");
  CHECK(e.dv.empty());  // one launch for dK and dV
  // The same config under the plans without it, and the dQ kernel unchanged.
  CHECK(plan_backward(d256, {32, 64, 4, 2}, warpgroups()).split_kv);
  CHECK(p.q.rows == plan_backward(d256, {32, 64, 4, 2}, warpgroups()).q.rows);
  CHECK(plan_backward(analyze_spec(test::make(DType::bf16, 192, "none", 128)), {32, 64, 8, 1}, warpgroups())
            .warpgroup_split);
}

TEST_CASE("backward warpgroups: the heuristic takes them with the knob where dK and dV need two warpgroups",
          "[pipeline][backward]") {
  auto pick = [](int dqk, int dv, const Target& t, const char* score = "score") {
    std::string why;
    const std::string c =
        backward_heuristic(*analyze_spec(test::with_score(test::make(DType::bf16, dqk, "causal", dv), score)), t, &why)
            .str();
    return c + " (" + why + ")";
  };
  for (auto [dqk, dv] : {std::pair{256, 256}, {160, 160}, {192, 128}, {136, 128}}) {
    CHECK_THAT(pick(dqk, dv, warpgroups()), Catch::StartsWith("bm32_bn64_w8_s2") && Catch::Contains("by warpgroup"));
    CHECK_THAT(pick(dqk, dv, warpgroups(), "30 * tanh(score / 30)"), !Catch::StartsWith("bm32_bn64_w8"));
    CHECK_THAT(pick(dqk, dv, Target{"sm_90a"}), !Catch::StartsWith("bm32_bn64_w8") && !Catch::Contains("by warpgroup"));
  }
  CHECK_THAT(pick(128, 128, warpgroups()), Catch::StartsWith("bm64_bn128_w8_s2"));  // both fit one warpgroup
  CHECK_THAT(pick(256, 256, warpgroups("sm_80")), !Catch::StartsWith("bm32_bn64_w8"));
  // What the heuristic picks, the plan builds.
  const AnalyzedSpecPtr s = analyze_spec(test::make(DType::bf16, 256, "causal"));
  CHECK(plan_backward(s, backward_heuristic(*s, warpgroups(), nullptr), warpgroups()).warpgroup_split);
}

TEST_CASE("backward warpgroups: refused off the knob, on mma.sync and where one warpgroup holds both outputs",
          "[pipeline][backward]") {
  const AnalyzedSpecPtr d256 = analyze_spec(test::make(DType::bf16, 256, "none"));
  CHECK_THROWS_WITH(plan_backward(d256, {32, 64, 8, 2}, Target{"sm_90a"}),
                    Catch::Contains("bm32_bn64_w8_s2 cannot be built") && Catch::Contains("FLASHJIT_BWD_WARPGROUPS=on"));
  CHECK_THROWS_WITH(plan_backward(d256, {32, 64, 8, 2}, warpgroups("sm_80")), Catch::Contains("need wgmma (sm_90a)"));
  Target sync = warpgroups();
  sync.allow_wgmma = false;
  CHECK_THROWS_WITH(plan_backward(d256, {32, 64, 8, 2}, sync), Catch::Contains("need wgmma"));
  CHECK_THROWS_WITH(plan_backward(analyze_spec(test::make(DType::bf16, 128, "none")), {32, 64, 8, 2}, warpgroups()),
                    Catch::Contains("d_qk + d_v > 256"));
  // The shape itself is legal (the tuner's space holds it; the plan judges the target).
  CHECK_FALSE(check_backward_shape({32, 64, 8, 2}));
  CHECK(check_backward_shape({32, 32, 8, 2}));
}

TEST_CASE("backward warpgroups: the dK/dV kernel assembles for sm_90a with no spills", "[codegen][ptxas][backward]") {
  const std::string ptxas = test::ptxas_path();
  test::TempDir dir;
  AttentionSpec doc = test::make(DType::bf16, 256, "document(doc)");
  doc.tensors = {{"doc", ScalarType::i32, {"seq_kv"}}};
  // Given configs, and the heuristic's (no config) at head-dim pairs far apart.
  const std::vector<std::pair<AttentionSpec, std::optional<TileConfig>>> cases = {
      {test::make(DType::bf16, 256, "none"), TileConfig{32, 64, 8, 2}},
      {test::make(DType::f16, 256, "causal"), TileConfig{32, 64, 8, 2}},
      {test::with_score(test::make(DType::bf16, 256, "causal"), "30 * tanh(score / 30)"), TileConfig{32, 64, 8, 2}},
      {doc, TileConfig{32, 64, 8, 2}},
      {test::make(DType::bf16, 256, "window(256, 0)"), TileConfig{32, 64, 8, 1}},
      {test::make(DType::bf16, 160, "causal"), TileConfig{32, 64, 8, 2}},
      {test::make(DType::bf16, 192, "causal", 128), TileConfig{32, 64, 8, 2}},
      {test::make(DType::bf16, 8, "causal", 256), std::nullopt},
      {test::make(DType::f16, 136, "none", 256), std::nullopt},
      {test::make(DType::bf16, 248, "causal", 152), std::nullopt},
  };
  for (const auto& [spec, config] : cases) {
    KernelRequest request;
    request.template_name = "attention_bwd";
    request.target = warpgroups();
    request.config = config;
    const CompiledKernel k = compile_planned(plan_kernel(analyze_spec(spec), request), StageOptions{});
    INFO(spec.canonical() << " " << k.description);
    CHECK_THAT(k.description, Catch::Contains("dK,dV by warpgroup"));
    // One dK/dV entry (no _dv launch); the hand-over's named barrier over both warpgroups.
    CHECK_THAT(k.ptx, !Catch::Contains(".entry " + k.entry + "_dv("));
    CHECK(std::regex_search(k.ptx, std::regex(R"(bar(rier)?\.sync(\.aligned)?\s+1,\s*256;)")));
    if (ptxas.empty()) continue;
    test::check_assembles(ptxas, dir.path, k);
  }
  if (ptxas.empty()) SKIP_TEST("ptxas not found: the PTX was checked but not assembled");
}

// The backward template on the CPU: every spec of the codegen matrix compiles to a backward module
// whose kernels all assemble with ptxas for sm_90a (wgmma) and sm_80 (mma.sync) without spilling;
// configs that break a limit are rejected naming it.
#include <catch2/catch.hpp>

#include <regex>

#include "tests/codegen_matrix.hpp"
#include "tests/support.hpp"

using namespace flashjit;

TEST_CASE("codegen backward: the matrix assembles for sm_90a and sm_80 with no spills", "[codegen][ptxas][backward]") {
  const std::string ptxas = test::ptxas_path();
  test::TempDir dir;
  CompileOptions sm90;
  sm90.backward = true;
  CompileOptions sm80 = sm90;
  sm80.arch = "sm_80";
  for (const AttentionSpec& s : test::codegen_matrix())
    for (const CompileOptions& o : {sm90, sm80}) {
      CompiledKernel k = compile_to_ptx(s, o);
      INFO(s.canonical() << k.arch << " " << k.description);
      CHECK_THAT(k.description, Catch::StartsWith("attention_bwd/"));
      // The dK/dV kernel (or its dK half), the dQ kernel and the D pre-pass.
      CHECK_THAT(k.ptx, Catch::Contains(".entry " + k.entry + "(") && Catch::Contains(".entry " + k.entry + "_dq(") &&
                            Catch::Contains(".entry " + k.entry + "_prep("));
      if (k.arch == "sm_90a") CHECK_THAT(k.ptx, Catch::Contains("wgmma.mma_async.sync.aligned"));
      else CHECK_THAT(k.ptx, Catch::Contains("mma.sync.aligned.m16n8k16") && !Catch::Contains("wgmma"));
      // dQ summed in the dK/dV kernel: its bulk reductions, the dK/dV kernel without dQ for
      // deterministic calls, and the conversion. Never per-element atomics.
      const bool fused = k.description.find("dQ fused") != std::string::npos;
      CHECK(fused == (k.ptx.find("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32") != std::string::npos));
      if (fused)
        CHECK_THAT(k.ptx, Catch::Contains(".entry " + k.entry + "_kv(") && Catch::Contains(".entry " + k.entry + "_dqc("));
      CHECK_FALSE(std::regex_search(k.ptx, std::regex(R"(\s(atom|red)\.)")));
      if (ptxas.empty()) continue;
      const std::string report = test::check_assembles(ptxas, dir.path, k);
      CHECK_THAT(report, !Catch::Contains("warpgroup.arrive is injected"));
    }
  if (ptxas.empty()) SKIP_TEST("ptxas not found: the PTX was checked but not assembled");
}

TEST_CASE("codegen backward: FLASHJIT_MMA=sync gives mma.sync on sm_90a", "[codegen][backward]") {
  CompileOptions o;
  o.backward = true;
  o.mma = "sync";
  CompiledKernel k = compile_to_ptx(test::make(DType::bf16, 128, "causal"), o);
  CHECK_THAT(k.description, Catch::StartsWith("attention_bwd/mma16816"));
  CHECK_THAT(k.ptx, Catch::Contains("mma.sync.aligned.m16n8k16") && !Catch::Contains("wgmma"));
}

TEST_CASE("codegen backward: configs that break a limit are rejected naming it", "[codegen][backward]") {
  CompileOptions o;
  o.backward = true;
  const AttentionSpec s = test::make(DType::bf16, 128, "causal");
  o.backward_config = TileConfig{64, 96, 4, 2};
  CHECK_THROWS_WITH(compile_to_ptx(s, o), Catch::Contains("block_n must be 16 or 32 × num_warps"));
  o.backward_config = TileConfig{48, 64, 4, 2};
  CHECK_THROWS_WITH(compile_to_ptx(s, o), Catch::Contains("block_m must be 32, 64 or 128"));
  o.backward_config = TileConfig{128, 256, 8, 3};
  o.arch = "sm_80";
  CHECK_THROWS_WITH(compile_to_ptx(test::make(DType::bf16, 256, "none"), o),
                    Catch::Contains("bytes of shared memory; sm_80 allows"));
  // A given config is the backward's, and the forward's config does not leak into it.
  o = CompileOptions{};
  o.backward = true;
  o.config = TileConfig{128, 64, 8, 3};
  o.backward_config = TileConfig{64, 64, 4, 1};
  CHECK(compile_to_ptx(s, o).config.str() == "bm64_bn64_w4_s1");
}

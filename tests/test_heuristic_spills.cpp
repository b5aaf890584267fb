// The heuristic table never spills, for any head-dim pair (8 to 256 in steps of 8, both dims) on
// sm_80 (mma.sync) and sm_90a (wgmma). ptxas over the whole grid takes hours on a CPU, so this test
// checks a fixed sample: the corners, the pairs that spilled before the d > 128 row's register
// rule (templates/fwd/plan.cpp, kMmaSyncWideBudget), and 12 pairs drawn with a fixed seed.
// scripts/heuristic_spill_grid.sh runs the whole grid.
#include <catch2/catch.hpp>

#include <fstream>
#include <random>
#include <utility>
#include <vector>

#include "flashjit/flashjit.hpp"
#include "tests/codegen_matrix.hpp"
#include "tests/support.hpp"

using namespace flashjit;

TEST_CASE("heuristic: sampled head-dim pairs compile without spills on sm_80 and sm_90a", "[codegen][ptxas][heuristic]") {
  const std::string ptxas = test::ptxas_path();
  if (ptxas.empty()) SKIP_TEST("ptxas not found: the spill check needs one (CUDA 12 or later)");
  std::vector<std::pair<int, int>> pairs = {{8, 8},     {8, 256},   {256, 8},   {256, 256}, {64, 64},   {128, 128},
                                            {136, 136}, {136, 248}, {136, 256}, {136, 208}, {64, 240},  {128, 256},
                                            {120, 248}, {192, 128}, {128, 136}, {200, 200}};
  std::mt19937 rng(16);
  for (int i = 0; i < 12; ++i) pairs.emplace_back(8 * (1 + rng() % 32), 8 * (1 + rng() % 32));
  test::TempDir dir;
  // Causal with a softcap score: the most registers of the codegen matrix's masks and scores.
  for (const auto& [qk, v] : pairs)
    for (const char* arch : {"sm_80", "sm_90a"}) {
      AttentionSpec s = test::make(DType::bf16, qk, "causal", v);
      s.score = "30 * tanh(score / 30)";
      CompileOptions o;
      o.arch = arch;
      const CompiledKernel k = compile_to_ptx(s, o);
      const std::string path = dir.path + "/k.ptx";
      std::ofstream(path) << k.ptx;
      auto r = test::run_command("'" + ptxas + "' -v -arch=" + arch + " -o " + path + ".cubin " + path);
      INFO(arch << " head_dim {qk: " << qk << ", v: " << v << "} " << k.config_reason << "\n" << r.output);
      REQUIRE(r.code == 0);
      CHECK_THAT(r.output, Catch::Contains("0 bytes spill stores, 0 bytes spill loads"));
      CHECK_FALSE(test::spills(r.output));
    }
}

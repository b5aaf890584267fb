// GQA packing (Target::pack_gqa) on the host: the planner refuses specs whose packed rows would
// mix what differs per query head, the kernel key tells packed kernels apart, the runtime's rule
// for when packing pays, and the packed forward of a matrix of specs assembles for sm_90a and
// sm_80 without spills. Its numerics run on the GPU (tests/test_gpu_split_kv.cpp).
#include <catch2/catch.hpp>
#include <fstream>

#include "compiler/pipeline.hpp"
#include "runtime/split_kv.hpp"
#include "support/ptxas.hpp"
#include "tests/codegen_matrix.hpp"
#include "tests/support.hpp"

using namespace flashjit;

namespace {

AttentionSpec spec_of(int d, const std::string& mask, const std::string& score = "score") {
  AttentionSpec s;
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = d;
  s.mask = mask;
  s.score = score;
  return s;
}

PlannedKernel plan_packed(const AttentionSpec& s, int group, const std::string& arch = "sm_90a", bool split = false,
                          bool varlen = false, bool paged = false, int page_size = 0) {
  KernelRequest r;
  r.target.arch = arch;
  r.target.pack_gqa = group;
  r.target.split_kv = split;
  r.target.varlen = varlen;
  r.target.paged = paged;
  r.target.page_size = page_size;
  return plan_kernel(analyze_spec(s), r);
}

}  // namespace

TEST_CASE("pack_gqa: masks and scores that read the query head, and block maps, are refused", "[pack_gqa]") {
  AttentionSpec alibi = spec_of(64, "causal_br", "score - slope[h] * abs(q - kv)");
  alibi.tensors = {{"slope", ScalarType::f32, {"heads_q"}}};
  AttentionSpec doc = spec_of(64, "causal_br && document(doc)");
  doc.tensors = {{"doc", ScalarType::i32, {"batch", "seq_kv"}}};
  const std::pair<AttentionSpec, std::string> refused[] = {
      {alibi, "the score reads the query head h"},
      {spec_of(64, "h > 0 || kv <= q"), "the mask reads the query head h"},
      {doc, "block map"},
  };
  for (const auto& [spec, words] : refused) {
    INFO(spec.mask << " / " << spec.score);
    try {
      plan_packed(spec, 4);
      FAIL("a spec that cannot be packed was planned packed");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::spec);
      CHECK_THAT(e.what(), Catch::Contains("GQA packing is not possible") && Catch::Contains(words));
    }
    CHECK_NOTHROW(plan_packed(spec, 1));  // the same spec unpacked
  }
  // h_kv is the same for every row of a packed CTA: allowed.
  CHECK_NOTHROW(plan_packed(spec_of(64, "causal_br && h_kv >= 0"), 8));
}

TEST_CASE("pack_gqa: packed and split kernels have their own keys and say so", "[pack_gqa][split]") {
  const AttentionSpec s = spec_of(128, "causal_br");
  const PlannedKernel plain = plan_packed(s, 1), four = plan_packed(s, 4), eight = plan_packed(s, 8);
  const PlannedKernel split = plan_packed(s, 1, "sm_90a", true), both = plan_packed(s, 4, "sm_90a", true);
  CHECK(plain.key.hash != four.key.hash);
  CHECK(four.key.hash != eight.key.hash);
  CHECK(plain.key.hash != split.key.hash);
  CHECK(four.key.hash != both.key.hash);
  CHECK(plain.entry != four.entry);
  CHECK_THAT(four.plan->describe(), Catch::Contains("+gqa4") && !Catch::Contains("+split"));
  CHECK_THAT(both.plan->describe(), Catch::Contains("+gqa4") && Catch::Contains("+split"));
  CHECK_THAT(plain.plan->describe(), !Catch::Contains("+gqa") && !Catch::Contains("+split"));
  // Only a split module holds the combine kernel.
  CHECK_THAT(split.key.text, Catch::Contains("split_combine@"));
  CHECK_THAT(plain.key.text, !Catch::Contains("split_combine@"));
  // ... and names it, so that the runtime looks up only functions the module has.
  CHECK(split.describe().combine_entry == split.entry + "_combine");
  CHECK(both.describe().combine_entry == both.entry + "_combine");
  CHECK(plain.describe().combine_entry.empty());
  CHECK(four.describe().combine_entry.empty());
}

TEST_CASE("pack_gqa: the runtime packs when the packed tiles are fuller (FlashAttention-3's rule)", "[pack_gqa]") {
  CHECK(rt::pack_gqa_pays(1, 8, 64));      // 1 row of 64 against 8 of 64
  CHECK(rt::pack_gqa_pays(4, 4, 64));      // 4 against 16
  CHECK(rt::pack_gqa_pays(16, 4, 128));    // 16 of 128 against 64 of 128
  CHECK_FALSE(rt::pack_gqa_pays(1, 1, 64));     // no group
  CHECK_FALSE(rt::pack_gqa_pays(4096, 4, 64));  // full tiles either way
  CHECK_FALSE(rt::pack_gqa_pays(64, 8, 64));
  CHECK_FALSE(rt::pack_gqa_pays(0, 8, 64));
}

TEST_CASE("pack_gqa: the packed, split, varlen and paged forwards assemble without spills on sm_90a and sm_80",
          "[pack_gqa][ptxas]") {
  const std::string tool = ptxas::find();
  if (tool.empty()) SKIP_TEST("ptxas not found: the packed PTX was produced but not assembled");
  test::TempDir dir;
  AttentionSpec cap = spec_of(128, "causal_br", "softcap * tanh(score / softcap)");
  cap.params = {{"softcap", ScalarType::f32, 30}};
  const std::vector<std::pair<AttentionSpec, int>> cases = {
      {spec_of(64, "none"), 8}, {spec_of(128, "causal_br"), 4}, {cap, 8},
      {spec_of(96, "causal_br && kv >= q + seq_kv - seq_q - 300"), 4}, {spec_of(256, "none"), 2},
      {spec_of(128, "causal_br"), 1}};
  for (const auto& [spec, group] : cases)
    for (const char* arch : {"sm_90a", "sm_80"})
      // packed; + split; + split and varlen; + split and paged: the page size read at run time,
      // specialised to 16 (pages per key tile) and to 256 (tiles per page); + split, varlen and
      // paged 16 (packed queries against a paged cache)
      for (int form = 0; form < 7; ++form) {
      const bool split = form > 0;
      StageOptions stages;
      stages.keep_llvm_ir = false;
      const CompiledKernel k = compile_planned(plan_packed(spec, group, arch, split, form == 2 || form == 6, form >= 3,
                                                         form == 4 || form == 6 ? 16 : form == 5 ? 256 : 0), stages);
      const std::string path = dir.path + "/k.ptx";
      std::ofstream(path) << k.ptx;
      const test::Command r = test::run_command("'" + tool + "' -v -arch=" + arch + " -o " + path + ".cubin " + path);
      INFO(arch << " d=" << spec.head_dim_qk << " " << spec.mask << " group " << group << " form " << form << "\n"
                << r.output);
      REQUIRE(r.code == 0);
      CHECK_THAT(r.output, Catch::Contains("Compiling entry function '" + k.entry + "'"));
      CHECK(split == !k.combine_entry.empty());
      if (split) CHECK_THAT(r.output, Catch::Contains("Compiling entry function '" + k.combine_entry + "'"));
      // Split on sm_90: the combine may start early and waits for the partials on the device
      // (programmatic dependent launch); sm_80 has no griddepcontrol.
      const bool early = split && std::string(arch) == "sm_90a";
      CHECK(early == (k.ptx.find("griddepcontrol.launch_dependents;") != std::string::npos));
      CHECK(early == (k.ptx.find("griddepcontrol.wait;") != std::string::npos));
      CHECK(early == (k.description.find("+split(dependent-launch)") != std::string::npos));
      CHECK_FALSE(test::spills(r.output));
    }
}

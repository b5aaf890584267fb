// The issue-2 spec subset: parsing, limits, canonical text, knobs.
#include <catch2/catch.hpp>

#include "flashjit/flashjit.hpp"

using namespace flashjit;

namespace {

std::string spec_error(const std::string& yaml) {
  try {
    AttentionSpec::from_yaml(yaml, "t.yaml");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::spec);
    return e.what();
  }
  FAIL("expected a spec error for:\n" << yaml);
  return "";
}

}  // namespace

TEST_CASE("spec: YAML subset parses dtype, head_dim and mask", "[spec]") {
  AttentionSpec s = AttentionSpec::from_yaml("name: t\ndtype: fp16\nhead_dim: 64\nmask: causal\n");
  CHECK(s.dtype == DType::f16);
  CHECK(s.head_dim_qk == 64);
  CHECK(s.head_dim_v == 64);
  CHECK(s.mask == "causal");
  AttentionSpec g = AttentionSpec::from_yaml("dtype: bf16\nhead_dim: {qk: 192, v: 128}\n");
  CHECK(g.head_dim_qk == 192);
  CHECK(g.head_dim_v == 128);
  CHECK(g.mask == "none");
}

TEST_CASE("spec: canonical text round-trips and ignores key order", "[spec]") {
  AttentionSpec a = AttentionSpec::from_yaml("mask: causal\nhead_dim: 96\ndtype: fp16\n");
  AttentionSpec b = AttentionSpec::from_yaml(a.canonical());
  CHECK(a.canonical() == b.canonical());
  CHECK(a.canonical() == "dtype: fp16\nhead_dim: 96\nmask: causal\n");
  CHECK(default_spec().canonical() == "name: default\ndtype: bf16\nhead_dim: 128\nmask: causal\n");
}

TEST_CASE("spec: unsupported head dims name the value and the rule", "[spec]") {
  for (int d : {0, 4, 100, 264, 512}) {
    std::string msg = spec_error("dtype: bf16\nhead_dim: " + std::to_string(d) + "\n");
    CHECK_THAT(msg, Catch::Contains(std::to_string(d)) && Catch::Contains("multiple of 8 from 8 to 256"));
  }
  CHECK_THAT(spec_error("head_dim: {qk: 64}\n"), Catch::Contains("needs both 'qk' and 'v'"));
  CHECK_THAT(spec_error("head_dim: sixty\n"), Catch::Contains("t.yaml:1:11") && Catch::Contains("must be an integer"));
}

TEST_CASE("spec: unsupported dtype, mask and keys are errors with line:col", "[spec]") {
  CHECK_THAT(spec_error("dtype: fp8\n"), Catch::Contains("t.yaml:1:8") && Catch::Contains("'fp8'") &&
                                             Catch::Contains("allowed: fp16, bf16"));
  CHECK_THAT(spec_error("dtype: bf16\nmask: sliding\n"),
             Catch::Contains("t.yaml:2:7") && Catch::Contains("'sliding'") && Catch::Contains("allowed: none, causal"));
  CHECK_THAT(spec_error("dtype: bf16\nhead_dims: 64\n"), Catch::Contains("t.yaml:2:1") && Catch::Contains("unknown key 'head_dims'"));
  CHECK_THAT(spec_error("dtype: [bf16\n"), Catch::Contains("YAML syntax error"));
  CHECK_THAT(spec_error("- a\n- b\n"), Catch::Contains("must be a YAML mapping"));
}

TEST_CASE("knobs: one registry with every FLASHJIT_* variable documented", "[knobs]") {
  std::vector<std::string> names;
  for (const KnobInfo& k : knobs()) {
    names.push_back(k.name);
    CHECK(k.name.rfind("FLASHJIT_", 0) == 0);
    CHECK(!k.doc.empty());
  }
  for (const char* required : {"FLASHJIT_LOG", "FLASHJIT_DUMP_DIR", "FLASHJIT_CACHE_DIR", "FLASHJIT_OVERRIDE_DIR"})
    CHECK(std::find(names.begin(), names.end(), required) != names.end());
  CHECK(!cache_dir().empty());
}

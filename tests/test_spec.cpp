// The public AttentionSpec over the DSL front end: YAML and C++ agree, errors carry positions.
#include <catch2/catch.hpp>

#include <algorithm>

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

TEST_CASE("spec: YAML parses dtype, head dims, mask, score, params and tensors", "[spec]") {
  AttentionSpec s = AttentionSpec::from_yaml(
      "name: t\ndtype: fp16\nhead_dim: {qk: 192, v: 128}\nmask: \"causal && q - kv < window\"\n"
      "score: \"score - slope[h] * abs(q - kv)\"\nparams:\n  window: {type: i32, default: 256}\n"
      "tensors:\n  slope: {type: f32, dims: [heads_q]}\n");
  CHECK(s.dtype == DType::f16);
  CHECK(s.head_dim_qk == 192);
  CHECK(s.head_dim_v == 128);
  CHECK(s.mask == "causal && q - kv < window");
  CHECK(s.score == "score - slope[h] * abs(q - kv)");
  REQUIRE(s.params.size() == 1);
  CHECK(s.params[0].name == "window");
  CHECK(s.params[0].type == ScalarType::i32);
  CHECK(s.params[0].default_value == 256);
  REQUIRE(s.tensors.size() == 1);
  CHECK(s.tensors[0].dims == std::vector<std::string>{"heads_q"});
  AttentionSpec plain = AttentionSpec::from_yaml("dtype: bf16\nhead_dim: 64\n");
  CHECK(plain.mask == "none");
  CHECK(plain.score == "score");
}

TEST_CASE("spec: a spec built in C++ has the same canonical text as its YAML", "[spec]") {
  AttentionSpec yaml = AttentionSpec::from_yaml(
      "dtype: bf16\nhead_dim: 128\nmask: \"causal && q - kv < window\"\nscore: \"softcap * tanh(score / softcap)\"\n"
      "params:\n  window: {type: i32, default: 4096}\n  softcap: {type: f32, default: 30.0}\n");
  AttentionSpec cpp;
  cpp.dtype = DType::bf16;
  cpp.head_dim_qk = cpp.head_dim_v = 128;
  cpp.mask = "causal&&(q-kv)<window";  // spacing and parentheses do not matter
  cpp.score = "softcap * tanh(score / softcap)";
  cpp.params = {{"softcap", ScalarType::f32, 30.0}, {"window", ScalarType::i32, 4096}};
  CHECK(cpp.canonical() == yaml.canonical());
  CHECK(AttentionSpec::from_yaml(yaml.canonical()).canonical() == yaml.canonical());
  CHECK_THAT(default_spec().canonical(), Catch::Contains("mask: \"causal\"") && Catch::Contains("head_dim: 128"));
}

TEST_CASE("spec: unsupported head dims and dtypes name the value and the rule with line:col", "[spec]") {
  CHECK_THAT(spec_error("dtype: bf16\nhead_dim: 100\n"),
             Catch::Contains("t.yaml:2:11") && Catch::Contains("100 is not a multiple of 8"));
  CHECK_THAT(spec_error("dtype: bf16\nhead_dim: 264\n"), Catch::Contains("t.yaml:2:11") && Catch::Contains("264"));
  CHECK_THAT(spec_error("dtype: bf16\nhead_dim: 4\n"), Catch::Contains("4 is too small"));
  CHECK_THAT(spec_error("dtype: fp8\nhead_dim: 64\n"), Catch::Contains("t.yaml:1:8") && Catch::Contains("fp8"));
  AttentionSpec bad;
  bad.head_dim_qk = 100;
  CHECK_THROWS_WITH(bad.validate(), Catch::Contains("100"));
}

TEST_CASE("spec: bad expressions, keys and declarations are errors naming the problem", "[spec]") {
  CHECK_THAT(spec_error("dtype: bf16\nhead_dim: 64\nmask: \"q >= kv +\"\n"), Catch::Contains("t.yaml:3:"));
  CHECK_THAT(spec_error("dtype: bf16\nhead_dims: 64\n"), Catch::Contains("t.yaml:2:1") && Catch::Contains("head_dims"));
  CHECK_THAT(spec_error("dtype: [bf16\n"), Catch::Contains("t.yaml"));
  AttentionSpec s;
  s.mask = "doc[q] == doc[kv]";
  s.tensors = {{"doc", ScalarType::i32, {"sequence"}}};
  CHECK_THROWS_WITH(s.validate(), Catch::Contains("dimension 'sequence' is not allowed"));
  AttentionSpec p;
  p.mask = "kv < n";
  p.params = {{"n", ScalarType::i32, 2.5}};
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("param 'n'") && Catch::Contains("not an i32"));
  AttentionSpec u;
  u.mask = "kv < undeclared";
  CHECK_THROWS_AS(u.validate(), Error);
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

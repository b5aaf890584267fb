// Spec loading, canonical text, the C++ builder and the examples; `flashjit check` round-trips them.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compiler/dsl/printer.hpp"
#include "compiler/dsl/spec.hpp"
#include "compiler/dsl/spec_loader.hpp"

using namespace flashjit::dsl;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> example_specs() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(FLASHJIT_SOURCE_DIR) / "examples" / "specs"))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("flashjit_dsl_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

Diagnostic first_error(const std::string& yaml) {
  try {
    load_spec(yaml, "s.yaml");
  } catch (const SpecError& e) {
    REQUIRE_FALSE(e.diagnostics().empty());
    return e.diagnostics()[0];
  }
  FAIL("expected a SpecError for:\n" << yaml);
  return {};
}

}  // namespace

TEST_CASE("every example spec checks, and its canonical text is a fixed point", "[dsl][spec][examples]") {
  auto specs = example_specs();
  REQUIRE(specs.size() >= 8);
  for (const auto& p : specs) {
    INFO(p);
    Spec a = load_spec_file(p.string());
    std::string c1 = a.canonical();
    Spec b = load_spec(c1, "canonical.yaml");
    CHECK(b.canonical() == c1);
    CHECK(b.head_dim_qk == a.head_dim_qk);
    CHECK(b.head_dim_v == a.head_dim_v);
    CHECK(b.params.size() == a.params.size());
    CHECK(b.tensors.size() == a.tensors.size());
    REQUIRE(static_cast<bool>(a.mask) == static_cast<bool>(b.mask));
    if (a.mask) CHECK(same_expr(*a.mask, *b.mask));
    REQUIRE(static_cast<bool>(a.score) == static_cast<bool>(b.score));
    if (a.score) CHECK(same_expr(*a.score, *b.score));
    REQUIRE(a.score_grad);
  }
}

TEST_CASE("the check command accepts every example and its output round-trips", "[dsl][spec][examples][cli]") {
  const std::string check = std::string(FLASHJIT_CLI_PATH) + " check";
  fs::path dir = temp_dir();
  for (const auto& p : example_specs()) {
    INFO(p);
    fs::path out = dir / (p.stem().string() + ".canonical.yaml");
    std::string cmd = check + " '" + p.string() + "' > '" + out.string() + "' 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    fs::path again = dir / (p.stem().string() + ".again.yaml");
    std::string cmd2 = check + " '" + out.string() + "' > '" + again.string() + "' 2>&1";
    REQUIRE(std::system(cmd2.c_str()) == 0);
    CHECK(read(out) == read(again));
    CHECK(read(out) == load_spec_file(p.string()).canonical());
    std::string json = dir / (p.stem().string() + ".json");
    std::string cmd3 = check + " --json '" + p.string() + "' > '" + json + "'";
    REQUIRE(std::system(cmd3.c_str()) == 0);
    CHECK_THAT(read(json), Catch::Contains("\"canonical\":") && Catch::Contains("\"score_grad\":"));
  }
  fs::remove_all(dir);
}

TEST_CASE("SpecBuilder gives the same canonical text as the YAML", "[dsl][spec][builder]") {
  Spec yaml = load_spec(R"Y(
name: gemma_local
dtype: bf16
head_dim: 256
mask: "causal && q - kv < window"
score: "softcap * tanh(score / softcap)"
params:
  window: {type: i32, default: 4096}
  softcap: {type: f32, default: 50.0}
tune:
  block_n: [64, 32]
  block_m: [128, 64, 64]
)Y",
                        "gemma.yaml");
  Tune t;
  t.block_m = {64, 128};
  t.block_n = {32, 64};
  Spec built = SpecBuilder()
                   .name("gemma_local")
                   .dtype(DType::BF16)
                   .head_dim(256)
                   .mask("causal&&q-kv<window")
                   .score("softcap*tanh(score/softcap)")
                   .param_f32("softcap", 50.0f)
                   .param_i32("window", 4096)
                   .tune(t)
                   .build();
  CHECK(built.canonical() == yaml.canonical());

  Spec gqa_yaml = load_spec("dtype: fp16\nhead_dim: {v: 128, qk: 192}\nmask: causal_br && document(doc)\n"
                            "tensors:\n  doc: {type: i32, dims: [batch, seq_kv]}\n",
                            "gqa.yaml");
  Spec gqa = SpecBuilder()
                 .dtype(DType::F16)
                 .head_dim(192, 128)
                 .mask("causal_br && document(doc)")
                 .tensor("doc", Type::I32, {Extent::symbolic(Extent::Kind::Batch), Extent::symbolic(Extent::Kind::SeqKv)})
                 .build();
  CHECK(gqa.canonical() == gqa_yaml.canonical());
  CHECK(gqa.head_dim_qk == 192);
  CHECK(gqa.head_dim_v == 128);
}

TEST_CASE("SpecBuilder reports every error at once", "[dsl][spec][builder]") {
  try {
    SpecBuilder().head_dim(100, 512).mask("q >= kvv").param_i32("q").build();
    FAIL("build() accepted a broken spec");
  } catch (const SpecError& e) {
    std::string all = format_all(e.diagnostics());
    CHECK(e.diagnostics().size() == 4);
    CHECK_THAT(all, Catch::Contains("head_dim.qk: 100 is not a multiple of 8"));
    CHECK_THAT(all, Catch::Contains("head_dim.v: 512 is above the limit of 256"));
    CHECK_THAT(all, Catch::Contains("'q' is a reserved word"));
    CHECK_THAT(all, Catch::Contains("<mask>:1:6: unknown name 'kvv'; did you mean 'kv'?"));
  }
}

TEST_CASE("canonical text does not depend on spelling, order or defaults", "[dsl][spec]") {
  const char* a = "dtype: bf16\nhead_dim: 64\nmask: 'q>=kv && (kv<n)'\nparams: {n: {type: i32, default: 3}, m: {type: f32}}\n";
  const char* b = "params:\n  m: {default: 0, type: f32}\n  n: {type: i32, default: +3}\nmask: q >= kv && kv < n\nhead_dim: {qk: 64, v: 64}\ndtype: BF16\n";
  CHECK(load_spec(a, "a").canonical() == load_spec(b, "b").canonical());
  // `true` is "no mask" and `score` is "no score modifier".
  CHECK(load_spec("dtype: fp16\nhead_dim: 8\nmask: 'true'\nscore: score\n", "c").canonical() ==
        load_spec("dtype: fp16\nhead_dim: 8\n", "d").canonical());
  CHECK(load_spec("dtype: fp16\nhead_dim: 8\nmask: none\n", "e").mask == nullptr);
}

TEST_CASE("expression errors point into the YAML file, whatever the quoting", "[dsl][spec][diagnostics]") {
  struct Case {
    std::string yaml;
    int line, col;
  } cases[] = {
      {"dtype: bf16\nhead_dim: 64\nmask: \"q >= kvv\"\n", 3, 13},
      {"dtype: bf16\nhead_dim: 64\nmask: 'q >= kvv'\n", 3, 13},
      {"dtype: bf16\nhead_dim: 64\nmask: q >= kvv\n", 3, 12},
      {"dtype: bf16\nhead_dim: 64\nmask: |\n  q >= kvv\n", 4, 8},
      {"dtype: bf16\nhead_dim: 64\nmask: >-\n    causal &&\n    q >= kvv\n", 5, 10},
      {"dtype: bf16\nhead_dim: 64\nmask: \"causal &&\n  q >= kvv\"\n", 4, 8},
      {"dtype: bf16\n\thead_dim: 64\n", 2, 1},
  };
  for (const auto& c : cases) {
    INFO(c.yaml);
    Diagnostic d = first_error(c.yaml);
    CHECK(d.file == "s.yaml");
    CHECK(d.line == c.line);
    CHECK(d.col == c.col);
    if (c.line != 2) {
      CHECK_THAT(d.message, Catch::Contains("unknown name 'kvv'; did you mean 'kv'?"));
      CHECK(d.source_line.substr(static_cast<size_t>(d.col - 1), 3) == "kvv");
    }
  }
}

TEST_CASE("all errors of a spec are reported together", "[dsl][spec][diagnostics]") {
  try {
    load_spec("dtype: fp8\nhead_dim: 72\nmsk: causal\nparams:\n  w: {type: int}\ntune:\n  block_m: [48]\n", "many.yaml");
    FAIL("accepted");
  } catch (const SpecError& e) {
    std::string all = e.what();
    CHECK(e.diagnostics().size() == 4);
    CHECK_THAT(all, Catch::Contains("many.yaml:1:8: dtype: 'fp8': fp8 is not supported yet"));
    CHECK_THAT(all, Catch::Contains("many.yaml:3:1: unknown key 'msk'; did you mean 'mask'?"));
    CHECK_THAT(all, Catch::Contains("many.yaml:5:13: params.w.type: unknown type 'int'; expected i32 or f32 (did you mean 'i32'?)"));
    CHECK_THAT(all, Catch::Contains("many.yaml:7:13: tune.block_m[0]: 48 is not a valid tile size"));
  }
}

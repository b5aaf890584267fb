// Specs and tools shared by the codegen tests of the forward and the backward.
#include "tests/codegen_matrix.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/support.hpp"

namespace flashjit::test {

AttentionSpec make(DType dt, int d, const std::string& mask, int dv) {
  AttentionSpec s;
  s.dtype = dt;
  s.head_dim_qk = d;
  s.head_dim_v = dv ? dv : d;
  s.mask = mask;
  return s;
}

std::string ptxas_path() {
  for (const char* p : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"})
    if (std::filesystem::exists(p)) return p;
  auto c = run_command("command -v ptxas");
  return c.code == 0 ? c.output.substr(0, c.output.find('\n')) : "";
}

AttentionSpec with_score(AttentionSpec s, const char* score) {
  s.score = score;
  return s;
}

bool spills(const std::string& report) { return std::regex_search(report, std::regex(R"([1-9][0-9]* bytes spill)")); }

std::string check_assembles(const std::string& ptxas, const std::string& dir, const CompiledKernel& k) {
  const std::string path = dir + "/" + k.key + ".ptx";
  std::ofstream(path) << k.ptx;
  const Command r = run_command("'" + ptxas + "' -v -arch=" + k.arch + " -o " + path + ".cubin " + path);
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK_FALSE(spills(r.output));
  CHECK_THAT(r.output, !Catch::Contains("serialized"));
  return r.output;
}

// The codegen matrix: every mask and score at d=128 in fp16 and bf16, and causal, document
// and softcap at every head dim (bf16), including d_qk ≠ d_v.
std::vector<AttentionSpec> codegen_matrix() {
  struct V {
    std::string mask, score;
    std::vector<ParamDecl> params;
    std::vector<TensorDecl> tensors;
  };
  const std::vector<V> variants = {
      {"none", "score"},
      {"causal", "score"},
      {"causal_br", "score"},
      {"window(256, 0)", "score"},
      {"prefix(n) || causal", "score", {{"n", ScalarType::i32, 100}}},
      {"document(doc)", "score", {}, {{"doc", ScalarType::i32, {"seq_kv"}}}},
      {"none", "softcap * tanh(score / softcap)", {{"softcap", ScalarType::f32, 30}}},
      {"causal", "score - slope[h] * abs(q - kv)", {}, {{"slope", ScalarType::f32, {"heads_q"}}}},
  };
  std::vector<AttentionSpec> specs;
  for (const V& v : variants)
    for (DType dt : {DType::f16, DType::bf16}) {
      AttentionSpec s = make(dt, 128, v.mask);
      s.score = v.score;
      s.params = v.params;
      s.tensors = v.tensors;
      specs.push_back(s);
    }
  const std::pair<int, int> dims[] = {{16, 16}, {32, 32}, {64, 64}, {72, 72}, {80, 80}, {96, 96}, {160, 160}, {192, 192}, {256, 256}, {192, 128}};
  for (auto [d, dv] : dims)
    for (size_t i : {size_t(1), size_t(5), size_t(6)}) {
      AttentionSpec s = make(DType::bf16, d, variants[i].mask, dv);
      s.score = variants[i].score;
      s.params = variants[i].params;
      s.tensors = variants[i].tensors;
      specs.push_back(s);
    }
  return specs;
}


}  // namespace flashjit::test

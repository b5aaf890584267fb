// Malformed specs and expressions: `flashjit check` exits 2 with a `file:line:col` message that
// names the problem, the source line and a caret; nothing goes to stdout.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace {

struct Case {
  const char* what;    // YAML text, or the expression when `expr` is set
  bool expr;
  const char* where;   // expected "line:col" of the first error
  const char* says;    // a phrase the message must contain
  const char* kind = nullptr;  // --kind for expressions
};

const Case kCases[] = {
    // ---- YAML structure and keys ----
    {"dtype: bf16\nhead_dim: 128\nmaks: causal\n", false, "3:1", "unknown key 'maks'; did you mean 'mask'?"},
    {"dtype: bf16\nhead_dim: 128\nscore_mod: score\n", false, "3:1", "unknown key 'score_mod'"},
    {"dtype: bf16\nhead_dim: 128\ndtype: fp16\n", false, "3:1", "duplicate key 'dtype'"},
    {"head_dim: 128\n", false, "1:1", "missing required key 'dtype'"},
    {"dtype: bf16\n", false, "1:1", "missing required key 'head_dim'"},
    {"- dtype: bf16\n", false, "1:1", "a spec is a mapping"},
    {"dtype: bf16\nhead_dim: [128\n", false, "3:1", "invalid YAML: end of sequence flow not found"},
    {"dtype: bf16\nhead_dim: 128\n  mask: causal\n", false, "3:7", "invalid YAML: illegal map value"},
    {"dtype: bf16\nhead_dim: 128\nmask: *y\n", false, "3:7", "invalid YAML: the referenced anchor is not defined"},
    {"", false, "1:1", "empty spec"},
    {"dtype: bf16\nhead_dim: 128\n---\ndtype: fp16\nhead_dim: 64\n", false, "3:1", "a second YAML document"},
    {"---\ndtype: bf16\nhead_dim: 128\n--- # more\n", false, "4:1", "a second YAML document"},
    {"dtype: bf16\nhead_dim: 128\n...\n# next\nmask: causal\n", false, "5:1", "a second YAML document"},
    {"dtype: bf16\nhead_dim: 128\n---\nbogus: [1\n", false, "5:1", "invalid YAML"},
    // yaml-cpp's LoadAll never returns on this one (found by fuzz_spec); Load drops the rest.
    {"# c\n,ame: x\ndtype: bf16\nhead_dim: 64\n", false, "2:1", "the parser reads a second document from here"},
    {"dtype: bf16\nhead_dim: 64\ntensors:\n  t: {type: f32, dims: [65536, 65536]}\n", false, "4:24",
     "the fixed dims multiply to more than 2^31-1 (2147483647) elements"},
    // ---- dtype and head_dim ----
    {"dtype: fp8\nhead_dim: 128\n", false, "1:8", "fp8 is not supported yet"},
    {"dtype: fp32\nhead_dim: 128\n", false, "1:8", "unknown dtype 'fp32'; expected fp16 or bf16"},
    {"dtype: bf16\nhead_dim: 100\n", false, "2:11", "100 is not a multiple of 8"},
    {"dtype: bf16\nhead_dim: 512\n", false, "2:11", "512 is above the limit of 256"},
    {"dtype: bf16\nhead_dim: 0\n", false, "2:11", "0 is too small"},
    {"dtype: bf16\nhead_dim: 12.5\n", false, "2:11", "expected an integer, got '12.5'"},
    {"dtype: bf16\nhead_dim: {qk: 192}\n", false, "2:11", "missing 'v'"},
    {"dtype: bf16\nhead_dim: {qk: 192, vv: 128}\n", false, "2:21", "unknown key 'vv'; did you mean 'v'?"},
    {"dtype: bf16\nhead_dim: {qk: 196, v: 128}\n", false, "2:16", "head_dim.qk: 196 is not a multiple of 8"},
    // ---- params, tensors, tune ----
    {"dtype: bf16\nhead_dim: 64\nparams:\n  w: {type: i32, default: 1.5}\n", false, "4:27", "params.w.default: expected an integer"},
    {"dtype: bf16\nhead_dim: 64\nparams:\n  w: {type: bool}\n", false, "4:13", "unknown type 'bool'; expected i32 or f32"},
    {"dtype: bf16\nhead_dim: 64\nparams:\n  w: {default: 3}\n", false, "4:3", "params.w: missing 'type'"},
    {"dtype: bf16\nhead_dim: 64\nparams:\n  q: {type: i32}\n", false, "4:3", "'q' is a reserved word"},
    {"dtype: bf16\nhead_dim: 64\nparams:\n  w: {type: i32, defualt: 3}\n", false, "4:18", "unknown key 'defualt'; did you mean 'default'?"},
    {"dtype: bf16\nhead_dim: 64\nparams:\n  w: {type: i32, default: 4294967296}\n", false, "4:27", "does not fit in i32"},
    {"dtype: bf16\nhead_dim: 64\nparams:\n  s: {type: f32, default: 1e39}\n", false, "4:27", "out of the range of f32"},
    {"dtype: bf16\nhead_dim: 64\nparams:\n  d: {type: i32}\ntensors:\n  d: {type: i32, dims: [seq_kv]}\n", false, "6:3", "'d' is already declared as a param"},
    {"dtype: bf16\nhead_dim: 64\ntensors:\n  doc: {type: i32, dims: [seq]}\n", false, "4:27", "unknown extent 'seq'"},
    {"dtype: bf16\nhead_dim: 64\ntensors:\n  doc: {type: i32, dims: []}\n", false, "4:26", "expected a non-empty list of extents"},
    {"dtype: bf16\nhead_dim: 64\ntensors:\n  doc: {type: i32}\n", false, "4:3", "missing 'dims'"},
    {"dtype: bf16\nhead_dim: 64\ntune:\n  block_m: [48]\n", false, "4:13", "48 is not a valid tile size"},
    {"dtype: bf16\nhead_dim: 64\ntune:\n  num_warps: [3]\n", false, "4:15", "3 warps"},
    {"dtype: bf16\nhead_dim: 64\ntune:\n  stages: [2]\n", false, "4:3", "unknown key 'stages'; did you mean 'num_stages'?"},
    {"name: \"my spec!\"\ndtype: bf16\nhead_dim: 64\n", false, "1:7", "may only use letters, digits"},
    // ---- expressions inside specs (positions map into the YAML file) ----
    {"dtype: bf16\nhead_dim: 64\nmask: \"q - kv < windw\"\nparams:\n  window: {type: i32}\n", false, "3:17", "unknown name 'windw'; did you mean 'window'?"},
    {"dtype: bf16\nhead_dim: 64\nmask: \"score > 0.0\"\n", false, "3:8", "'score' is only available in the score expression"},
    {"dtype: bf16\nhead_dim: 64\nmask: \"q - kv\"\n", false, "3:10", "the mask must be a bool expression"},
    {"dtype: bf16\nhead_dim: 64\nscore: \"score > 1.0\"\n", false, "3:15", "the score must be a number"},
    {"dtype: bf16\nhead_dim: 64\nscore: floor(score)\n", false, "3:8", "floor() of score is not differentiable"},
    {"dtype: bf16\nhead_dim: 64\nmask: \"doc[q] == doc[kv]\"\n", false, "3:8", "unknown tensor 'doc'"},
    {"dtype: bf16\nhead_dim: 64\nmask: \"slope[q] > 0.0\"\ntensors:\n  slope: {type: f32, dims: [heads_q]}\n", false, "3:14",
     "index 'q' runs over seq_q, but dim 0 of 'slope' is heads_q"},
    {"dtype: bf16\nhead_dim: 64\nmask: \"doc[q, kv] == 0\"\ntensors:\n  doc: {type: i32, dims: [seq_kv]}\n", false, "3:8",
     "tensor 'doc' has 1 dim [seq_kv] but is indexed with 2"},
    {"dtype: bf16\nhead_dim: 64\nmask: document(slope)\ntensors:\n  slope: {type: f32, dims: [heads_q]}\n", false, "3:7",
     "document(slope) needs an i32 tensor"},
    // ---- lone expressions ----
    {"q >= kv &&", true, "1:11", "expected an expression, found the end of the expression"},
    {"q = kv", true, "1:3", "'=' is not an operator; did you mean '=='?"},
    {"q >= kv & causal", true, "1:9", "did you mean '&&'?"},
    {"(q >= kv", true, "1:9", "expected ')' to close the '(' at column 1"},
    {"q >= kv)", true, "1:8", "unmatched ')'"},
    {"tanhh(score)", true, "1:1", "unknown function 'tanhh'; did you mean 'tanh'?"},
    {"min(score)", true, "1:1", "'min' takes 2 arguments, got 1"},
    {"causal(1)", true, "1:1", "'causal' takes no arguments"},
    {"window(1)", true, "1:1", "'window' takes 2 arguments (window(left, right)), got 1"},
    {"q >= 3000000000", true, "1:6", "integer '3000000000' does not fit in i32"},
    {"q >= kv $ 1", true, "1:9", "unexpected character '$'"},
    {"q < kv < 5", true, "1:8", "chained comparisons are not supported"},
    {"!q", true, "1:1", "'!' needs a bool, but its operand is i32"},
    {"q + true > 0", true, "1:3", "'+' needs numbers, but its operands are i32 and bool"},
    {"causal == 1", true, "1:8", "'==' compares bool with i32"},
    {"q > 0 ? 1 : causal", true, "1:7", "the branches of ?: are i32 and bool"},
    {"where(q, 1, 2) > 0", true, "1:7", "the condition of where(c, a, b) must be bool, but it is i32"},
    {"window(1.5, 0)", true, "1:8", "window() takes i32 arguments"},
    {"q > 0 ? 1", true, "1:10", "expected ':' to complete the '?'"},
    {"score % 2.0", true, "1:7", "'%' is not differentiable in score"},
    {"+q > 0", true, "1:1", "unary '+' is not part of the language"},
    {"1.5.2 > q", true, "1:4", "expected an operator or the end of the expression, found '.2'"},
    {"2x > q", true, "1:1", "malformed number '2x'"},
    {"where(score > 0.0, 1.0, 0.0)", true, "1:1", "step function of score"},
    {"", true, "1:1", "empty expression"},
    {"prefix(n) || causal", true, "1:8", "unknown name 'n'"},
    {"q >= kv", true, "1:3", "the score must be a number", "score"},
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

// `flashjit check ARGS...`, stdout and stderr apart.
struct Checked {
  int code = -1;
  std::string out, err;
};

Checked check(const std::vector<std::string>& args, const fs::path& dir) {
  std::string cmd = shell_quote(FLASHJIT_CLI_PATH) + " check";
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  cmd += " > " + shell_quote((dir / "out").string()) + " 2> " + shell_quote((dir / "err").string());
  const int status = std::system(cmd.c_str());
  Checked c;
  if (WIFEXITED(status)) c.code = WEXITSTATUS(status);
  c.out = slurp(dir / "out");
  c.err = slurp(dir / "err");
  return c;
}

fs::path fresh_dir(const char* name) {
  const fs::path dir = fs::temp_directory_path() / (std::string(name) + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

}  // namespace

TEST_CASE("malformed specs and expressions exit 2 with a located message", "[dsl][errors][cli]") {
  REQUIRE(sizeof(kCases) / sizeof(kCases[0]) >= 40);
  const fs::path dir = fresh_dir("flashjit_dsl_errors_");
  int n = 0;
  for (const Case& c : kCases) {
    ++n;
    const fs::path file = dir / ("case" + std::to_string(n) + ".yaml");
    std::vector<std::string> args;
    std::string label;
    if (c.expr) {
      args = {"--expr", c.what};
      if (c.kind) args.insert(args.end(), {"--kind", c.kind});
      label = "<expr>";
    } else {
      std::ofstream(file) << c.what;
      args = {file.string()};
      label = file.string();
    }
    INFO("case " << n << ": " << c.what);
    const Checked r = check(args, dir);
    INFO("stderr:\n" << r.err);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::StartsWith(label + ":" + c.where));
    CHECK_THAT(r.err, Catch::Contains(c.says));
    CHECK_THAT(r.err, Catch::Contains("^"));  // the caret line under the source
  }
  fs::remove_all(dir);
}

TEST_CASE("usage errors exit 2 and --help exits 0", "[dsl][errors][cli]") {
  const fs::path dir = fresh_dir("flashjit_dsl_usage_");
  Checked r = check({}, dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("missing SPEC"));
  r = check({"--frobnicate"}, dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown option '--frobnicate'"));
  r = check({"--expr"}, dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--expr"));
  r = check({"/nonexistent/spec.yaml"}, dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::StartsWith("/nonexistent/spec.yaml: cannot read the spec"));
  r = check({"--expr", "q >= kv", "--kind", "bias"}, dir);
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("--kind"));
  r = check({"--help"}, dir);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("usage: flashjit check"));
  fs::remove_all(dir);
}

// The CLI without a YAML file (run/compile --dtype, --head-dim, --mask, ...) and its --json output,
// which is parsed here by Python's json module (a real parser, not substring checks).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "tests/support.hpp"

using namespace flashjit;

namespace {

const std::string kCli = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "flashjit").string();

std::string write(const test::TempDir& d, const std::string& name, const std::string& text) {
  std::string path = d.path + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// Runs `command` and feeds its stdout, one JSON document per line, to a Python snippet that sees
// them as `docs` and asserts on them. Returns the snippet's result (code 0 = every assertion held).
test::Command json_check(const test::TempDir& d, const std::string& command, const std::string& asserts) {
  const std::string script = write(d, "check.py",
                                   "import json, sys\n"
                                   "docs = [json.loads(line) for line in sys.stdin if line.strip()]\n"
                                   "assert docs, 'no JSON output'\n" +
                                       asserts + "\nprint('json ok')\n");
  return test::run_command("{ " + command + "; } 2>/dev/null | python3 " + script);
}

}  // namespace

TEST_CASE("cli: compile with spec flags gives the same PTX as the same spec in a file", "[cli][spec_flags]") {
  test::TempDir d;
  const std::string file = write(d, "s.yaml",
                                 "name: cli\ndtype: fp16\nhead_dim: {qk: 128, v: 64}\nmask: \"window(256, 0)\"\n"
                                 "score: \"softcap * tanh(score / softcap)\"\nparams:\n  softcap: {type: f32, default: 30}\n");
  auto from_file = test::run_command(kCli + " compile " + file + " -o " + d.path + "/a.ptx");
  REQUIRE(from_file.code == 0);
  auto from_flags = test::run_command(kCli + " compile --dtype fp16 --head-dim 128 --head-dim-v 64 --mask 'window(256, 0)'"
                                      " --score 'softcap * tanh(score / softcap)' --param softcap:f32=30 -o " +
                                      d.path + "/b.ptx");
  INFO(from_flags.output);
  REQUIRE(from_flags.code == 0);
  std::ifstream a(d.path + "/a.ptx"), b(d.path + "/b.ptx");
  const std::string pa((std::istreambuf_iterator<char>(a)), {}), pb((std::istreambuf_iterator<char>(b)), {});
  CHECK(pa.find(".entry") != std::string::npos);
  CHECK(pa == pb);
}

TEST_CASE("cli: spec flags report problems in the flag's own expression", "[cli][spec_flags]") {
  const std::pair<std::string, std::string> bad[] = {
      {"compile --mask 'q >= kvv'", "--mask: <expr>:1:6: "},
      {"compile --score 'score * temp'", "--score: <expr>:1:9: "},
      {"run --head-dim 64 --mask 'document(doc)'", "--mask: "},
      {"compile --dtype fp32", "--dtype: 'fp32' is not allowed; use bf16 or fp16"},
      {"compile --head-dim 0", "--head-dim: expected a positive integer"},
      {"compile --head-dim 100", "head_dim"},
      {"compile x.yaml --mask causal", "SPEC (x.yaml) and the spec flags (--dtype, --head-dim, --mask, ...) exclude"},
      {"run x.yaml --head-dim 64", "exclude each other"},
  };
  for (const auto& [args, says] : bad) {
    auto r = test::run_command(kCli + " " + args);
    INFO(args << ": " << r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains(says));
  }
  auto doc = test::run_command(kCli + " compile --mask 'causal && document(doc)' --tensor doc:i32:batch,seq_kv");
  INFO(doc.output);
  CHECK(doc.code == 0);
}

TEST_CASE("cli: --json of compile, info and run is one JSON object", "[cli][spec_flags][json]") {
  test::TempDir d;
  auto compile = json_check(d, kCli + " compile --head-dim 64 --mask causal --json",
                            "k = docs[0]\n"
                            "assert k['entry'] and k['arch'] == 'sm_90a' and k['text'].find('.entry') > 0, k.keys()\n"
                            "assert k['ptx_bytes'] == len(k['text'].encode()) and k['threads'] > 0");
  INFO(compile.output);
  CHECK(compile.code == 0);
  auto info = json_check(d, kCli + " info --json",
                         "i = docs[0]\nassert i['flashjit'].count('.') == 2 and 'FLASHJIT_LOG' in i['knobs']\n"
                         "assert (i['device'] is None) == ('device_error' in i)");
  INFO(info.output);
  CHECK(info.code == 0);
  // Without a GPU: the compile-only object and exit 69; with one, the run itself.
  auto run = json_check(d, kCli + " run --head-dim 64 --mask 'window(64, 0)' --batch 1 --heads 2 --seq 256 --json",
                        "r = docs[0]\nassert r['spec']['mask'] == 'window(64, 0)' and r['spec']['head_dim'] == 64\n"
                        "assert (r['ran'] and r['ok'] and r['runs'][0]['ok']) or (not r['ran'] and r['reason'])");
  INFO(run.output);
  CHECK(run.code == 0);
}

TEST_CASE("cli: check --json reports valid specs and problems as objects", "[cli][spec_flags][json]") {
  test::TempDir d;
  const std::string good = write(d, "good.yaml", "dtype: bf16\nhead_dim: 64\nmask: causal\n");
  const std::string bad = write(d, "bad.yaml", "dtype: bf16\nhead_dim: 64\nmask: \"q >= kvv\"\nscore: \"score * t\"\n");
  auto r = json_check(d, kCli + " check --json " + good + " " + bad,
                      "assert len(docs) == 2, docs\n"
                      "assert docs[0]['file'] == '" + good + "' and docs[0]['valid'] is True and 'canonical' in docs[0]\n"
                      "b = docs[1]\nassert b['file'] == '" + bad + "' and b['valid'] is False\n"
                      "assert [(e['line'], e['column']) for e in b['errors']] == [(3, 13), (4, 17)], b['errors']\n"
                      "assert all(e['file'] == b['file'] and 'kvv' in b['errors'][0]['message'] for e in b['errors'])");
  INFO(r.output);
  CHECK(r.code == 0);
  auto code = test::run_command(kCli + " check --json " + bad + " > /dev/null");
  CHECK(code.code == 2);
  auto expr = json_check(d, kCli + " check --json --expr 'q >= kvv'",
                         "e = docs[0]\nassert e['valid'] is False and e['errors'][0]['file'] == '<expr>'\n"
                         "assert (e['errors'][0]['line'], e['errors'][0]['column']) == (1, 6)");
  INFO(expr.output);
  CHECK(expr.code == 0);
}

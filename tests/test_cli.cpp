// The CLI's contract: exit codes, messages, and never clobbering a user's file on failure.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "tests/support.hpp"

using namespace flashjit;

namespace {

// The CLI sits next to the test binary, in the build folder and in a GPU bundle alike.
const std::string kCli = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "flashjit").string();

std::string write(const test::TempDir& d, const std::string& name, const std::string& text) {
  std::string path = d.path + "/" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("cli: --help on every command, and unknown commands/options are usage errors", "[cli]") {
  CHECK(test::run_command(kCli + " --help").code == 0);
  for (const char* cmd : {"info", "compile", "run"}) {
    auto r = test::run_command(kCli + " " + cmd + " --help");
    CHECK(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains(std::string("usage: flashjit ") + cmd));
  }
  auto u = test::run_command(kCli + " frobnicate");
  CHECK(u.code == 2);
  CHECK_THAT(u.output, Catch::Contains("unknown command 'frobnicate'"));
  auto o = test::run_command(kCli + " compile --bogus x.yaml");
  CHECK(o.code == 2);
  CHECK_THAT(o.output, Catch::Contains("unknown option --bogus"));
}

TEST_CASE("cli: compile emits PTX or LLVM IR, and bad specs exit 2 naming the problem", "[cli]") {
  test::TempDir d;
  std::string spec = write(d, "s.yaml", "dtype: fp16\nhead_dim: 96\nmask: causal\n");
  auto ptx = test::run_command(kCli + " compile " + spec + " --emit ptx");
  CHECK(ptx.code == 0);
  CHECK_THAT(ptx.output, Catch::Contains(".entry flashjit_fwd_"));
  // With ptxas at hand the summary gives registers and spills (what the tuner prunes by).
  if (std::filesystem::exists("/usr/local/cuda/bin/ptxas"))
    CHECK_THAT(ptx.output, Catch::Contains("registers, 0 B spill stores, 0 B spill loads"));
  auto ll = test::run_command(kCli + " compile " + spec + " --emit llvm --arch sm_80");
  CHECK(ll.code == 0);
  CHECK_THAT(ll.output, Catch::Contains("define ptx_kernel void @flashjit_fwd_"));
  auto bad = test::run_command(kCli + " compile " + write(d, "b.yaml", "dtype: bf16\nhead_dim: 100\n"));
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Catch::Contains("b.yaml:2:11") && Catch::Contains("100 is not a multiple of 8"));
  auto missing = test::run_command(kCli + " compile " + d.path + "/nope.yaml");
  CHECK(missing.code == 2);
  CHECK_THAT(missing.output, Catch::Contains("cannot read spec file"));
  auto cfg = test::run_command(kCli + " compile " + spec + " --config 64,64,4,7");
  CHECK(cfg.code == 2);
  CHECK_THAT(cfg.output, Catch::Contains("num_stages must be 1 to 4"));
}

TEST_CASE("cli: a failed compile never overwrites the -o file and a good one replaces it", "[cli]") {
  test::TempDir d;
  std::string out = write(d, "precious.ptx", "user data\n");
  auto r = test::run_command(kCli + " compile " + write(d, "b.yaml", "dtype: fp8\n") + " -o " + out);
  CHECK(r.code == 2);
  std::ifstream f(out);
  std::string kept((std::istreambuf_iterator<char>(f)), {});
  CHECK(kept == "user data\n");
  auto ok = test::run_command(kCli + " compile " + write(d, "g.yaml", "dtype: bf16\nhead_dim: 64\n") + " -o " + out);
  CHECK(ok.code == 0);
  std::ifstream g(out);
  std::string now((std::istreambuf_iterator<char>(g)), {});
  CHECK_THAT(now, Catch::Contains(".entry"));
}

TEST_CASE("cli: info and run say plainly whether a GPU is there (exit 69 when not)", "[cli]") {
  auto info = test::run_command(kCli + " info");
  CHECK_THAT(info.output, Catch::Contains("LLVM 19.") && Catch::Contains("PTX ISA 8.0") && Catch::Contains("cache dir"));
  if (test::gpu_available()) {
    CHECK(info.code == 0);
    CHECK_THAT(info.output, Catch::Contains("compute capability") && Catch::Contains("SMs"));
    return;
  }
  CHECK(info.code == 69);
  CHECK_THAT(info.output, Catch::Contains("device: none"));
  auto run = test::run_command(kCli + " run");
  CHECK(run.code == 69);
  CHECK_THAT(run.output, Catch::Contains("compiled ") && Catch::Contains("PTX ") && Catch::Contains("nothing ran"));
}

TEST_CASE("cli: check prints canonical specs and exits 2 on errors with line:col", "[cli]") {
  test::TempDir d;
  std::string good = write(d, "g.yaml", "dtype: bf16\nhead_dim: 64\nmask: \"q>=kv\"\n");
  auto ok = test::run_command(kCli + " check " + good);
  CHECK(ok.code == 0);
  CHECK_THAT(ok.output, Catch::Contains("mask: \"q >= kv\""));
  auto bad = test::run_command(kCli + " check " + write(d, "b.yaml", "dtype: bf16\nhead_dim: 64\nmask: \"q >= kvv\"\n"));
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Catch::Contains("b.yaml:3:") && Catch::Contains("kvv"));
  auto expr = test::run_command(kCli + " check --expr \"causal && q - kv < 128\"");
  CHECK(expr.code == 0);
}

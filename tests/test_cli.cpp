// The CLI's contract: exit codes, messages, and never clobbering a user's file on failure.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tests/codegen_matrix.hpp"
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

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

bool is_char_device(const char* path, struct stat* st) { return ::lstat(path, st) == 0 && S_ISCHR(st->st_mode); }

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
  CHECK_THAT(o.output, Catch::Contains("unknown option '--bogus'") && Catch::Contains("allowed: ") &&
                           Catch::Contains("--emit"));
}

TEST_CASE("cli: compile emits PTX or LLVM IR, and bad specs exit 2 naming the problem", "[cli]") {
  test::TempDir d;
  std::string spec = write(d, "s.yaml", "dtype: fp16\nhead_dim: 96\nmask: causal\n");
  auto ptx = test::run_command(kCli + " compile " + spec + " --emit ptx");
  CHECK(ptx.code == 0);
  CHECK_THAT(ptx.output, Catch::Contains(".entry flashjit_fwd_"));
  // With ptxas at hand the summary gives registers and spills (what the tuner prunes by).
  const bool have_ptxas = !test::ptxas_path().empty();
  if (have_ptxas) CHECK_THAT(ptx.output, Catch::Contains("registers, 0 B spill stores, 0 B spill loads"));
  // FLASHJIT_PTXAS naming a program makes the report run that one, as the runtime would; one that
  // does not run is said, not passed over.
  auto named = test::run_command("FLASHJIT_PTXAS=" + d.path + "/no-such-ptxas " + kCli + " compile " + spec +
                                 " -o " + d.path + "/named.ptx");
  CHECK(named.code == 0);
  CHECK_THAT(named.output, Catch::Contains("; ptxas " + d.path + "/no-such-ptxas did not run (registers unknown)"));
  auto ll = test::run_command(kCli + " compile " + spec + " --emit llvm --arch sm_80");
  CHECK(ll.code == 0);
  CHECK_THAT(ll.output, Catch::Contains("define ptx_kernel void @flashjit_fwd_"));
  auto bad = test::run_command(kCli + " compile " + write(d, "b.yaml", "dtype: bf16\nhead_dim: 100\n"));
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Catch::Contains("b.yaml:2:11") && Catch::Contains("100 is not a multiple of 8"));
  auto missing = test::run_command(kCli + " compile " + d.path + "/nope.yaml");
  CHECK(missing.code == 2);
  CHECK_THAT(missing.output, Catch::Contains("nope.yaml: cannot read the spec file"));
  auto cfg = test::run_command(kCli + " compile " + spec + " --config 64,64,4,7");
  CHECK(cfg.code == 2);
  CHECK_THAT(cfg.output, Catch::Contains("num_stages must be 1 to 4"));
  if (!have_ptxas) SKIP_TEST("ptxas not found: the compile summary's registers and spills were not checked");
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
  CHECK_THAT(info.output,
             Catch::Contains("LLVM 19.") && Catch::Contains("PTX ISA 8.0") && Catch::Contains("cache dir"));
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
  auto bad =
      test::run_command(kCli + " check " + write(d, "b.yaml", "dtype: bf16\nhead_dim: 64\nmask: \"q >= kvv\"\n"));
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Catch::Contains("b.yaml:3:") && Catch::Contains("kvv"));
  auto expr = test::run_command(kCli + " check --expr \"causal && q - kv < 128\"");
  CHECK(expr.code == 0);
}

TEST_CASE("cli: -h and --help on every command and subcommand, the top level and `help`", "[cli]") {
  for (const char* cmd : {"", " info", " check", " compile", " run", " tune", " cache", " cache list", " cache show",
                          " cache clear", " cache export", " cache import"}) {
    for (const char* flag : {" -h", " --help"}) {
      auto r = test::run_command(kCli + cmd + flag);
      INFO(cmd << flag << ": " << r.output);
      CHECK(r.code == 0);
      CHECK_THAT(r.output, Catch::Contains(std::string("usage: flashjit") + cmd + " "));
    }
  }
  auto help = test::run_command(kCli + " help");
  CHECK(help.code == 0);
  CHECK_THAT(help.output, Catch::Contains("usage: flashjit [OPTIONS]") && Catch::Contains("compile"));
  auto none = test::run_command(kCli);
  CHECK(none.code == 2);
  CHECK_THAT(none.output, Catch::Contains("usage: flashjit [OPTIONS]"));
  auto version = test::run_command(kCli + " --version");
  CHECK(version.code == 0);
  CHECK_THAT(version.output, Catch::StartsWith("flashjit " + versions().flashjit + " (LLVM 19."));
}

TEST_CASE("cli: --opt=value and --opt value both work", "[cli]") {
  test::TempDir d;
  std::string spec = write(d, "s.yaml", "dtype: bf16\nhead_dim: 64\nmask: causal\n");
  auto eq = test::run_command(kCli + " compile " + spec + " --emit=llvm --arch=sm_80 --config=64,64,4,1 --output=" +
                              d.path + "/a.ll");
  INFO(eq.output);
  CHECK(eq.code == 0);
  CHECK_THAT(eq.output, Catch::Contains("config bm64_bn64_w4_s1") && Catch::Contains("for sm_80"));
  auto sp = test::run_command(kCli + " compile " + spec + " --emit llvm --arch sm_80 --config 64,64,4,1 -o " + d.path +
                              "/b.ll");
  CHECK(sp.code == 0);
  std::ifstream a(d.path + "/a.ll"), b(d.path + "/b.ll");
  std::string ta((std::istreambuf_iterator<char>(a)), {}), tb((std::istreambuf_iterator<char>(b)), {});
  CHECK_THAT(ta, Catch::Contains("define ptx_kernel void @flashjit_fwd_"));
  CHECK(ta == tb);
  auto expr = test::run_command(kCli + " check --expr='q - kv < w' --param=w:i32=8 --kind=mask");
  CHECK(expr.code == 0);
  CHECK_THAT(expr.output, Catch::Contains("q - kv < w"));
}

TEST_CASE("cli: every flag is checked before the GPU: bad values exit 2 naming the flag and what it allows", "[cli]") {
  test::TempDir d;
  const std::string spec = write(d, "s.yaml", "dtype: bf16\nhead_dim: 64\nmask: causal\n");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"run --seq abc", "--seq: expected a positive integer, got 'abc'"},
      {"run --seq=0", "--seq: expected a positive integer, got '0'"},
      {"run --batch -3", "--batch"},
      {"run --config 1,2", "--config: '1,2' is not bm,bn,warps,stages"},
      {"run --config '64,64,4,1;64,64'", "--config: '64,64' is not bm,bn,warps,stages"},
      {"run --heads 6 --heads-kv 4", "--heads 6 is not a multiple of --heads-kv 4"},
      {"run --device x", "--device: expected an integer >= 0 and <= 2147483647, got 'x'"},
      {"run --frobnicate", "unknown option '--frobnicate'; allowed: "},
      {"run a.yaml b.yaml", "unexpected argument 'b.yaml'"},
      {"info --device -1", "--device"},
      {"compile " + spec + " --emit asm", "--emit: 'asm' is not allowed; use llvm or ptx"},
      {"compile " + spec + " --config 64", "--config: '64' is not bm,bn,warps,stages"},
      {"compile", "missing SPEC: give a spec file, or build one with --head-dim"},
      {"tune x.yaml --shapes 4x16 --mode fast", "--shapes: '4x16' is not BxHxSqxSkv"},
      {"tune " + spec + " --shapes 4x16x64x64 --mode fast", "--mode: 'fast' is not allowed; use quick or full"},
      {"tune " + spec + " --shapes 4x16x64x64 --deadline=0", "--deadline: expected a positive number, got '0'"},
      {"check --expr 'q >= kv' --kind bias", "--kind: 'bias' is not allowed; use mask or score"},
      {"check --expr 'q >= w' --param w", "--param: 'w': expected NAME:i32 or NAME:f32"},
      {"check --expr 'q >= w' --param w:i32=1.5", "the default '1.5' is not an i32"},
      {"check --expr 'd[q] > 0' --tensor d:i32:seq", "--tensor: 'd:i32:seq': 'seq' is not a dimension"},
      {"check --kind mask " + spec, "--kind requires --expr"},
      {"check --expr 'q >= kv' " + spec, "excludes"},
  };
  for (const auto& [args, says] : bad) {
    auto r = test::run_command(kCli + " " + args);
    INFO(args << ": " << r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains(says));
    CHECK_THAT(r.output, !Catch::Contains("nothing ran") && !Catch::Contains("compiled "));
  }
}

TEST_CASE("cli: check --expr prints the canonical expression and its analyses", "[cli]") {
  auto mask = test::run_command(kCli + " check --expr 'causal && q - kv < 128'");
  CHECK(mask.code == 0);
  CHECK_THAT(mask.output, Catch::StartsWith("causal && q - kv < 128\n# kv range: exact;") &&
                              Catch::Contains("\n# q range: exact;"));
  auto score = test::run_command(kCli + " check --expr 'softcap * tanh(score / softcap)' --param softcap:f32=50");
  CHECK(score.code == 0);
  CHECK_THAT(score.output, Catch::Contains("\n# d/dscore: ") && !Catch::Contains("kv range"));
  auto json = test::run_command(kCli + " check --json --expr 'doc[q] == doc[kv]' --tensor doc:i32:seq_q");
  CHECK(json.code == 0);
  CHECK_THAT(json.output, Catch::StartsWith("{\"expr\":\"doc[q] == doc[kv]\",\"kind\":\"mask\"") &&
                              Catch::Contains("\"affine\":false"));
  auto bad = test::run_command(kCli + " check --expr 'q >= kvv'");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Catch::StartsWith("<expr>:1:6: ") && Catch::Contains("^"));
}

TEST_CASE("cli: compile -o and cache export write a FIFO, then /dev/null, in place and never replace them", "[cli]") {
  test::TempDir d;
  const std::string spec = write(d, "s.yaml", "dtype: bf16\nhead_dim: 64\n"), fifo = d.path + "/pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // The reader is bounded: if flashjit never opened the FIFO, `cat` still ends and the test fails.
  for (const std::string& writer : {kCli + " compile " + spec + " -o " + fifo,
                                    "FLASHJIT_CACHE_DIR=" + d.path + "/cache " + kCli + " cache export " + fifo}) {
    auto r =
        test::run_command("(timeout 60 cat " + fifo + " > " + d.path + "/got & " + writer + "; rc=$?; wait; exit $rc)");
    INFO(writer << ": " << r.output);
    REQUIRE(r.code == 0);
    struct stat st {};
    REQUIRE((::lstat(fifo.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)));
    CHECK_THAT(slurp(d.path + "/got"), Catch::Contains(".entry") || Catch::Contains("flashjit_tuning_export: 1"));
  }
  // Proven on the FIFO, so now /dev/null itself: it stays the same character device.
  struct stat before {};
  struct stat after {};
  if (!is_char_device("/dev/null", &before)) return;
  auto r = test::run_command(kCli + " compile " + spec + " -o /dev/null");
  CHECK(r.code == 0);
  REQUIRE(is_char_device("/dev/null", &after));
  CHECK(after.st_rdev == before.st_rdev);
  CHECK(after.st_ino == before.st_ino);
}

TEST_CASE("cli: compile -o through a symlink writes its target and keeps the link", "[cli]") {
  test::TempDir d;
  const std::string spec = write(d, "s.yaml", "dtype: bf16\nhead_dim: 64\n");
  std::filesystem::create_directory(d.path + "/sub");
  const std::string target = write(d, "sub/real.ptx", "old\n"), link = d.path + "/link.ptx";
  REQUIRE(::symlink("sub/real.ptx", link.c_str()) == 0);
  auto r = test::run_command(kCli + " compile " + spec + " -o " + link);
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(std::filesystem::is_symlink(link));
  CHECK(std::filesystem::read_symlink(link) == "sub/real.ptx");
  CHECK_THAT(slurp(target), Catch::Contains(".entry"));
  // A failed compile leaves the target as it was.
  auto bad = test::run_command(kCli + " compile " + write(d, "b.yaml", "dtype: fp8\n") + " -o " + link);
  CHECK(bad.code == 2);
  CHECK_THAT(slurp(target), Catch::Contains(".entry"));
  CHECK(std::filesystem::is_symlink(link));
}

TEST_CASE("cli: a symlink planted at <out>.tmp.<pid> never makes compile -o write its target", "[cli]") {
  test::TempDir d;
  const std::string spec = write(d, "s.yaml", "dtype: bf16\nhead_dim: 64\n");
  const std::string victim = write(d, "victim", "victim\n"), out = d.path + "/out.ptx";
  // `exec` keeps the shell's pid, so $$ is the pid flashjit runs as: the temp name it once used.
  auto r =
      test::run_command("ln -s " + victim + " " + out + ".tmp.$$ && exec " + kCli + " compile " + spec + " -o " + out);
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(slurp(victim) == "victim\n");
  CHECK_THAT(slurp(out), Catch::Contains(".entry"));
}

TEST_CASE("cli: a write error on stdout fails every command with a message (exit 1)", "[cli]") {
  struct stat st {};
  if (!is_char_device("/dev/full", &st)) return;  // no /dev/full on this system
  test::TempDir d;
  const std::string spec = write(d, "g.yaml", "dtype: bf16\nhead_dim: 64\n");
  for (const std::string& args :
       std::vector<std::string>{"check " + spec, "compile " + spec, "check --expr 'q >= kv'", "--help", "cache list"}) {
    auto r = test::run_command("(FLASHJIT_CACHE_DIR=" + d.path + "/cache " + kCli + " " + args + " >/dev/full)");
    INFO(args << ": " << r.output);
    CHECK(r.code == 1);
    CHECK_THAT(r.output, Catch::Contains("flashjit: cannot write to standard output"));
  }
  // Output that fits stdio's buffer fails at the final flush, whose errno is the reason given.
  auto r = test::run_command("(" + kCli + " check " + spec + " >/dev/full)");
  CHECK_THAT(r.output,
             Catch::Contains("flashjit: cannot write to standard output: " + std::string(std::strerror(ENOSPC))));
  REQUIRE(is_char_device("/dev/full", &st));
}

TEST_CASE("cli: run --varlen and --splits refuse what they cannot take, naming it", "[cli][varlen]") {
  auto bad = test::run_command(kCli + " run --varlen 1:4096,x:3");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Catch::Contains("'x' is not a length") && Catch::Contains("Q or Q:KV"));
  auto neg = test::run_command(kCli + " run --varlen 5,-1");
  CHECK(neg.code == 2);
  CHECK_THAT(neg.output, Catch::Contains("'-1' is not a length"));
  auto both = test::run_command(kCli + " run --varlen 3,4 --backward");
  CHECK(both.code == 2);
  CHECK_THAT(both.output, Catch::Contains("--varlen runs one forward"));
  auto splits = test::run_command(kCli + " run --splits 129");
  CHECK(splits.code == 2);
  CHECK_THAT(splits.output, Catch::Contains("--splits"));
}

TEST_CASE("cli: run --deterministic is a backward option", "[cli][backward]") {
  auto r = test::run_command(kCli + " run --deterministic");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("--deterministic is a backward option: add --backward"));
}

TEST_CASE("cli: run --paged refuses page sizes it cannot take and forms it cannot join, naming them", "[cli][paged]") {
  for (const char* size : {"8", "24", "0", "x"}) {
    auto r = test::run_command(kCli + " run --paged " + size);
    INFO(size << ": " << r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains("--paged"));
  }
  auto odd = test::run_command(kCli + " run --paged 24");
  CHECK_THAT(odd.output, Catch::Contains("positive multiple of 16"));
  for (const char* other : {"--backward", "--json", "--varlen 3,4", "--config '64,64,4,2;64,128,4,2'"}) {
    auto r = test::run_command(kCli + " run --paged 16 " + other);
    INFO(other << ": " << r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains("runs one forward"));
  }
}

TEST_CASE("cli: run --paged verifies a paged decode and a paged chunked prefill against fp64", "[gpu][paged][cli]") {
  REQUIRE_GPU_OR_SKIP();
  for (const char* args : {" --paged 16 --batch 3 --heads 8 --heads-kv 2 --seq-q 1 --seq-kv 1000 --mask none",
                           " --paged 256 --batch 2 --heads 4 --heads-kv 4 --seq-q 37 --seq-kv 700 --mask causal_br"}) {
    auto r = test::run_command(kCli + " run" + args + " --reps 3");
    INFO(args << "\n" << r.output);
    CHECK(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("paged    ") && Catch::Contains("verify   PASS"));
  }
}

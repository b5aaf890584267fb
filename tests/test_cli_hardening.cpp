// The CLI against hostile input (issue 16): endless or huge files, multi-document YAML, malformed
// numbers and knobs, control characters, an unset HOME. Every case exits 2 (or 1) with a message
// naming what is wrong, never 70 ("a flashjit bug") and never by exhausting memory.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/support.hpp"

using namespace flashjit;

namespace {

const std::string kCli = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "flashjit").string();

std::string write(const test::TempDir& d, const std::string& name, const std::string& text) {
  std::string path = d.path + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The CLI with its address space capped at 2 GiB: a reader that does not stop fails fast (exit
// 70 from std::bad_alloc) instead of taking the machine's memory; the cache in `d`.
// `env`: more VAR=value words before the command.
test::Command cli(const test::TempDir& d, const std::string& args, const std::string& env = "") {
  return test::run_command("ulimit -v 2097152; FLASHJIT_CACHE_DIR='" + d.path + "/cache' " + env + " '" + kCli + "' " +
                           args);
}

const char* kSpec = "dtype: fp16\nhead_dim: 64\nmask: causal\n";

}  // namespace

TEST_CASE("cli: endless and oversized spec and import files are refused while reading (exit 2)", "[cli][hardening]") {
  test::TempDir d;
  REQUIRE(::symlink("/dev/zero", (d.path + "/zero.yaml").c_str()) == 0);
  const std::string big = write(d, "big.yaml", std::string(kSpec) + "# " + std::string((1 << 20) + 16, 'x') + "\n");
  for (const std::string& file : {std::string("/dev/zero"), d.path + "/zero.yaml", big}) {
    for (const char* cmd : {"check", "compile", "run", "tune --shapes 1x1x128x128 --mode quick"}) {
      INFO(cmd << " " << file);
      const std::string c(cmd);
      const std::string args = c.substr(0, c.find(' ')) + " '" + file + "'" +
                               (c.find(' ') == std::string::npos ? "" : c.substr(c.find(' ')));
      auto r = cli(d, args);
      CHECK(r.code == 2);
      CHECK_THAT(r.output, Catch::Contains("larger than the limit of 1 MiB"));
    }
    if (file == big) continue;  // under the import limit
    auto im = cli(d, "cache import '" + file + "'");
    INFO(im.output);
    CHECK(im.code == 2);
    CHECK_THAT(im.output, Catch::Contains("larger than the limit of 16 MiB"));
  }
  // A directory is named as one.
  auto dir = cli(d, "check '" + d.path + "'");
  CHECK(dir.code == 2);
  CHECK_THAT(dir.output, Catch::Contains("is a directory"));
  // A spec just under the limit is still read (and checked).
  const std::string ok = write(d, "ok.yaml", std::string(kSpec) + "# " + std::string((1 << 20) - 200, 'x') + "\n");
  auto r = cli(d, "check '" + ok + "'");
  CHECK(r.code == 0);
}

TEST_CASE("cli: a spec file holding two YAML documents is refused naming the line", "[cli][hardening]") {
  test::TempDir d;
  auto r = cli(d, "check '" + write(d, "two.yaml", std::string(kSpec) + "---\ndtype: bf16\nhead_dim: 128\n") + "'");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("two.yaml:4:1") && Catch::Contains("a second YAML document"));
}

TEST_CASE("cli: --config and --shapes numbers that overflow or trail junk are usage errors", "[cli][hardening]") {
  test::TempDir d;
  const std::string spec = write(d, "s.yaml", kSpec);
  for (const char* bad : {"99999999999,64,4,2", "64,64,4,2junk", "64,64,4,99999999999999999999", "64,64,4", "64,64,4,2,"}) {
    INFO(bad);
    auto r = cli(d, "compile '" + spec + "' --config '" + std::string(bad) + "' -o '" + d.path + "/out.ptx'");
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains("--config") && Catch::Contains("is not bm,bn,warps,stages"));
  }
  // The example the message gives is itself a config that compiles.
  auto r = cli(d, "compile '" + spec + "' --config x -o '" + d.path + "/out.ptx'");
  const size_t eg = r.output.find("e.g. ");
  REQUIRE(eg != std::string::npos);
  const std::string example = r.output.substr(eg + 5, r.output.find(')', eg) - eg - 5);
  INFO("example: " << example);
  for (const char* arch : {"sm_80", "sm_90a"})
    CHECK(cli(d, "compile '" + spec + "' --arch " + arch + " --config '" + example + "' -o '" + d.path + "/e.ptx'").code == 0);
  for (const char* shapes : {"99999999999999999999x1x128x128", "1x1x128x128junk"}) {
    auto t = cli(d, "tune '" + spec + "' --shapes " + shapes);
    CHECK(t.code == 2);
    CHECK_THAT(t.output, Catch::Contains("is not BxHxSqxSkv"));
  }
}

TEST_CASE("cli: tune --mode names the flag, and FLASHJIT_LOG is checked by every command", "[cli][hardening]") {
  test::TempDir d;
  const std::string spec = write(d, "s.yaml", kSpec);
  auto m = cli(d, "tune '" + spec + "' --shapes 1x1x128x128 --mode slow");
  CHECK(m.code == 2);
  CHECK_THAT(m.output, Catch::Contains("--mode") && Catch::Contains("'slow' is not allowed"));
  CHECK_THAT(m.output, !Catch::Contains("FLASHJIT_AUTOTUNE"));
  for (const std::string& args : {"check '" + spec + "'", std::string("info"), std::string("cache list"),
                                 "compile '" + spec + "' -o '" + d.path + "/o.ptx'", std::string("cache export -")}) {
    INFO(args);
    auto r = cli(d, args, "FLASHJIT_LOG=banana");
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains("FLASHJIT_LOG='banana' is not allowed; use one of error|warn|info|debug"));
  }
}

TEST_CASE("cli: control characters from specs and cache entries reach the terminal escaped", "[cli][hardening]") {
  test::TempDir d;
  // A spec name with ESC [2J (clear screen) and the C1 control CSI (U+009B, UTF-8 C2 9B).
  auto r = cli(d, "check '" + write(d, "evil.yaml", "name: \"x\\e[2Jy\\u009B\"\n" + std::string(kSpec)) + "'");
  CHECK(r.code == 2);
  CHECK(r.output.find('\x1b') == std::string::npos);
  CHECK(r.output.find("\xc2\x9b") == std::string::npos);
  CHECK_THAT(r.output, Catch::Contains("\\x1b[2J") && Catch::Contains("\\u009b"));
  // A tuning entry whose text fields hold escapes, imported and then listed and shown.
  const std::string entry = R"Y(flashjit_tuning_export: 1
gpus:
  - schema: 1
    gpu: {name: "NVIDIA \e]0;pwned\a H200", sm_count: 132, cc_major: 9, cc_minor: 0, driver_version: 13000}
    entries:
      - spec_hash: "0123456789abcdef"
        spec_name: "causal\e[31m"
        bucket: {seq_q: 4096, seq_kv: 4096, batch_heads: 64, d_qk: 128, d_v: 128}
        best: {block_m: 128, block_n: 64, num_warps: 4, num_stages: 2}
        median_ms: 0.398
        p20_ms: 0.39004
        p80_ms: 0.40994
        date: "2026-12-01T10:20:30Z\e[2J"
        flashjit_version: "0.1.0"
        mode: "quick"
        runners_up:
          - {config: bm128_bn128_w8_s3, failed: "\e[2Jptxas"}
)Y";
  auto im = cli(d, "cache import '" + write(d, "evil_export.yaml", entry) + "'");
  INFO(im.output);
  REQUIRE(im.code == 0);
  auto list = cli(d, "cache list");
  CHECK(list.code == 0);
  CHECK(list.output.find('\x1b') == std::string::npos);
  CHECK(list.output.find('\a') == std::string::npos);
  CHECK_THAT(list.output, Catch::Contains("causal\\x1b[31m"));
  // The entry's line: "    <id> causal... (<hash>) ..."; its first word is the id.
  const size_t line = list.output.rfind('\n', list.output.find("causal")) + 1;
  const size_t id = list.output.find_first_not_of(' ', line);
  auto show = cli(d, "cache show " + list.output.substr(id, list.output.find(' ', id) - id));
  INFO(show.output);
  CHECK(show.code == 0);
  CHECK(show.output.find('\x1b') == std::string::npos);
  CHECK_THAT(show.output, Catch::Contains("\\x1b[2Jptxas"));
}

TEST_CASE("cli: without HOME the cache is an absolute folder, never one relative to the working directory",
          "[cli][hardening]") {
  test::TempDir d;
  for (const char* env : {"env -u HOME -u XDG_CACHE_HOME -u FLASHJIT_CACHE_DIR",
                          "env -u FLASHJIT_CACHE_DIR HOME=relative XDG_CACHE_HOME=also/relative"}) {
    INFO(env);
    auto r = test::run_command(std::string("cd '") + d.path + "' && " + env + " '" + kCli + "' info");
    const size_t at = r.output.find("cache dir ");
    REQUIRE(at != std::string::npos);
    if (r.output.compare(at + 10, 5, "none ") == 0) {  // a user without a passwd home (some containers)
      CHECK_THAT(r.output, Catch::Contains("set FLASHJIT_CACHE_DIR to an absolute path"));
      continue;
    }
    CHECK(r.output.substr(at + 10, 1) == "/");
    CHECK_THAT(r.output, !Catch::Contains(".flashjit-cache") && !Catch::Contains("relative"));
  }
  auto xdg = test::run_command("env -u FLASHJIT_CACHE_DIR XDG_CACHE_HOME=/x/cache HOME=/home/u '" + kCli + "' info");
  CHECK_THAT(xdg.output, Catch::Contains("cache dir /x/cache/flashjit"));
}

namespace {

// A tuning export with one entry whose spec name is `spec_name` (YAML double-quoted text).
std::string tuning_export(const std::string& spec_name) {
  return R"Y(flashjit_tuning_export: 1
gpus:
  - schema: 1
    gpu: {name: "NVIDIA H200", sm_count: 132, cc_major: 9, cc_minor: 0, driver_version: 13000}
    entries:
      - spec_hash: "0123456789abcdef"
        spec_name: ")Y" + spec_name + R"Y("
        bucket: {seq_q: 4096, seq_kv: 4096, batch_heads: 64, d_qk: 128, d_v: 128}
        best: {block_m: 128, block_n: 64, num_warps: 4, num_stages: 2}
        median_ms: 0.398
        p20_ms: 0.39004
        p80_ms: 0.40994
        date: "2026-12-01T10:20:30Z"
        flashjit_version: "0.1.0"
        mode: "quick"
        runners_up: []
)Y";
}

// The first tuning id in `cache list --json` output.
std::string first_id(const std::string& json) {
  const size_t at = json.find("\"id\":\"");
  return at == std::string::npos ? "" : json.substr(at + 6, json.find('"', at + 6) - at - 6);
}

}  // namespace

TEST_CASE("cli: the size knobs (FLASHJIT_CACHE_MAX_BYTES, FLASHJIT_SCRATCH_KEEP) are checked by every command before it runs",
          "[cli][hardening]") {
  test::TempDir d;
  const std::string spec = write(d, "s.yaml", kSpec);
  for (const std::string knob : {"FLASHJIT_CACHE_MAX_BYTES", "FLASHJIT_SCRATCH_KEEP"}) {
    for (const std::string& args : {"check '" + spec + "'", std::string("info"), std::string("cache show 0123"),
                                   std::string("cache export -")}) {
      INFO(knob << ": " << args);
      auto r = cli(d, args, knob + "=lots");
      CHECK(r.code == 2);
      CHECK_THAT(r.output, Catch::Contains(knob + "='lots' is not a size"));
    }
    CHECK(cli(d, "check '" + spec + "'", knob + "=512MiB").code == 0);
  }
}

TEST_CASE("cli: JSON output writes C1 controls and DEL as \\u escapes, never raw", "[cli][hardening]") {
  test::TempDir d;
  // A spec file whose name holds CSI (U+009B, UTF-8 C2 9B) and DEL: `check --json` quotes the path.
  auto r = cli(d, "check --json '" + write(d, "x\xc2\x9b\x7f.yaml", kSpec) + "'");
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(r.output.find("\xc2\x9b") == std::string::npos);
  CHECK(r.output.find('\x7f') == std::string::npos);
  CHECK_THAT(r.output, Catch::Contains("x\\u009b\\u007f.yaml"));
  // A tuning entry's spec name with CSI, through the library's JSON (`cache list/show --json`).
  REQUIRE(cli(d, "cache import '" + write(d, "e.yaml", tuning_export("causal\\u009B31m")) + "'").code == 0);
  auto list = cli(d, "cache list --json");
  INFO(list.output);
  CHECK(list.code == 0);
  CHECK(list.output.find("\xc2\x9b") == std::string::npos);
  CHECK_THAT(list.output, Catch::Contains("causal\\u009b31m"));
  auto show = cli(d, "cache show --json " + first_id(list.output));
  CHECK(show.code == 0);
  CHECK(show.output.find("\xc2\x9b") == std::string::npos);
  CHECK_THAT(show.output, Catch::Contains("causal\\u009b31m"));
}

TEST_CASE("cli: cache list, show and export check the cache's trust as the loaders do: entries of a folder others "
          "can write are not presented as usable",
          "[cli][hardening]") {
  test::TempDir d;
  REQUIRE(cli(d, "cache import '" + write(d, "e.yaml", tuning_export("trusty")) + "'").code == 0);
  auto before = cli(d, "cache list --json");
  const std::string id = first_id(before.output);
  REQUIRE(id.size() == 12);
  CHECK_THAT(cli(d, "cache list").output, Catch::Contains("trusty"));
  // The cache root becomes writable by every user: anyone could have planted these entries.
  const std::string root = d.path + "/cache";
  REQUIRE(::chmod(root.c_str(), 0777) == 0);
  auto list = cli(d, "cache list");
  INFO(list.output);
  CHECK(list.code == 0);
  CHECK_THAT(list.output, !Catch::Contains("trusty"));
  CHECK_THAT(list.output, Catch::Contains("not trusted, not listed: " + root + " is writable by every user") &&
                              Catch::Contains("chmod go-w " + root));
  CHECK_THAT(cli(d, "cache list --json").output, Catch::Contains("\"untrusted\":[\"" + root + " is writable"));
  auto show = cli(d, "cache show " + id);
  CHECK(show.code == 1);
  CHECK_THAT(show.output, Catch::Contains("not searched: " + root + " is writable by every user"));
  auto exported = cli(d, "cache export -");
  CHECK(exported.code == 2);
  CHECK_THAT(exported.output, Catch::Contains("cannot export tunings: " + root + " is writable by every user"));
  // Fixed as the message says: listed again.
  REQUIRE(::chmod(root.c_str(), 0755) == 0);
  CHECK_THAT(cli(d, "cache list").output, Catch::Contains("trusty"));
  CHECK(cli(d, "cache show " + id).code == 0);
}

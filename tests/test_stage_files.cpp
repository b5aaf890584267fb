// The compiler's stage files. FLASHJIT_OVERRIDE_DIR (CompileOptions::override_dir) replaces a
// stage's output with a file: a file that cannot be that stage's output is an Error(usage) naming
// it, never compiled or ignored. FLASHJIT_DUMP_DIR (CompileOptions::dump_dir) writes every stage:
// safely from many threads at once, and a failed dump is a warning, never a failed compile.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "flashjit/flashjit.hpp"
#include "tests/codegen_matrix.hpp"
#include "tests/support.hpp"

using namespace flashjit;
using test::make;

namespace {

const std::string kCli = (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "flashjit").string();

struct Overrides {
  test::TempDir dir;
  AttentionSpec spec = make(DType::bf16, 64, "causal");
  CompiledKernel plain = compile_to_ptx(spec, {});
  std::string folder = dir.path + "/" + plain.key;
  Overrides() { std::filesystem::create_directories(folder); }
  void put(const std::string& name, const std::string& text) const {
    std::ofstream(folder + "/" + name, std::ios::binary) << text;
  }
  CompiledKernel compile() const {
    CompileOptions o;
    o.override_dir = dir.path;
    return compile_to_ptx(spec, o);
  }
  void rejects(const std::string& words) const {
    try {
      compile();
      FAIL("the override was accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::usage);
      CHECK_THAT(e.what(), Catch::Contains(folder) && Catch::Contains(words));
    }
  }
};

}  // namespace

TEST_CASE("overrides: empty, garbage and foreign PTX is refused naming the file", "[codegen][overrides]") {
  Overrides o;
  o.put("ptx.ptx", "");
  o.rejects("ptx.ptx is empty");
  o.put("ptx.ptx", " \n\t\n");
  o.rejects("ptx.ptx is empty");
  o.put("ptx.ptx", "this is not PTX\n");
  o.rejects("is not PTX: it has no .version directive");
  // Valid PTX, but of another kernel: the driver would load a module without this key's kernel.
  const std::string other = compile_to_ptx(make(DType::f16, 128, "none"), {}).ptx;
  o.put("ptx.ptx", other);
  o.rejects("has no .entry " + o.plain.entry);
  // The kernel's own PTX with a comment added is used as given.
  o.put("ptx.ptx", o.plain.ptx + "// edited by hand\n");
  CHECK_THAT(o.compile().ptx, Catch::EndsWith("// edited by hand\n"));
}

TEST_CASE("overrides: LLVM IR without the kernel, and a directory in a file's place, are refused",
          "[codegen][overrides]") {
  Overrides o;
  o.put("llvm-ir.ll", "target triple = \"nvptx64-nvidia-cuda\"\ndefine void @something_else() {\n  ret void\n}\n");
  o.rejects("does not define @" + o.plain.entry);
  o.put("llvm-ir.ll", "");
  o.rejects("llvm-ir.ll is empty");
  std::filesystem::remove(o.folder + "/llvm-ir.ll");
  std::filesystem::create_directories(o.folder + "/ptx.ptx");
  o.rejects("ptx.ptx is not a regular file");
  // Through the CLI: exit 2 with the same message.
  const std::string spec = o.dir.path + "/s.yaml";
  std::ofstream(spec) << "dtype: bf16\nhead_dim: 64\nmask: causal\n";
  auto r = test::run_command("FLASHJIT_OVERRIDE_DIR='" + o.dir.path + "' '" + kCli + "' compile '" + spec + "' -o '" +
                             o.dir.path + "/out.ptx'");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("ptx.ptx is not a regular file"));
}

TEST_CASE("dumps: threads compiling one spec all succeed and leave whole files", "[codegen][dumps]") {
  test::TempDir dir;
  const AttentionSpec spec = make(DType::f16, 64, "causal");
  CompileOptions o;
  o.dump_dir = dir.path;
  constexpr int kThreads = 8;
  std::vector<std::string> errors(kThreads), ptx(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        ptx[t] = compile_to_ptx(spec, o).ptx;
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    INFO("thread " << t);
    CHECK(errors[t].empty());
    CHECK(ptx[t] == ptx[0]);
  }
  const CompiledKernel k = compile_to_ptx(spec, {});
  std::ifstream f(dir.path + "/" + k.key + "/ptx.ptx", std::ios::binary);
  CHECK(std::string((std::istreambuf_iterator<char>(f)), {}) == k.ptx);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path + "/" + k.key)) {
    INFO(e.path());
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);  // no temp file left behind
    ++files;
  }
  CHECK(files >= 6);  // spec, analyze, plan, llvm-ir, opt, ptx
}

TEST_CASE("dumps: a dump folder that cannot be written is a warning, and the compile succeeds", "[codegen][dumps]") {
  test::TempDir dir;
  const std::string not_a_dir = dir.path + "/file";
  std::ofstream(not_a_dir) << "a file where the dump folder should be\n";
  const std::string spec = dir.path + "/s.yaml";
  std::ofstream(spec) << "dtype: fp16\nhead_dim: 64\n";
  auto r = test::run_command("FLASHJIT_DUMP_DIR='" + not_a_dir + "' '" + kCli + "' compile '" + spec + "' -o '" +
                             dir.path + "/out.ptx'");
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("was not dumped to " + not_a_dir) && Catch::Contains("the compile goes on"));
  CompileOptions o;
  o.dump_dir = not_a_dir;
  CHECK_THAT(compile_to_ptx(make(DType::f16, 64, "none"), o).ptx, Catch::Contains(".entry"));
}

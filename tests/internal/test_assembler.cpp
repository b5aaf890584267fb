// Who assembles PTX (FLASHJIT_PTXAS) and the ptxas child process, without a GPU.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "runtime/assembler.hpp"
#include "support/ptxas.hpp"
#include "tests/support.hpp"

using namespace flashjit;

namespace {

// A kernel that does nothing, in the PTX ISA version flashjit emits.
const char* kEmptyKernel = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() { ret; }\n";

// An executable shell script `name` in `dir` that runs `body`: a stand-in for ptxas.
std::string script(const test::TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.path + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  REQUIRE(::chmod(path.c_str(), 0700) == 0);
  return path;
}

}  // namespace

TEST_CASE("assembler: driver, a path that does not run, and auto's release window", "[assembler]") {
  const rt::Assembler d = rt::choose_assembler("driver", 13000);
  CHECK(d.ptxas.empty());
  CHECK(d.id() == "driver");
  try {
    rt::choose_assembler("/nonexistent/ptxas", 13000);
    FAIL("a FLASHJIT_PTXAS path that does not run was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
    CHECK_THAT(std::string(e.what()), Catch::Contains("FLASHJIT_PTXAS='/nonexistent/ptxas'") &&
                                          Catch::Contains("auto, driver"));
  }
  const std::string found = ptxas::find();
  if (found.empty()) SKIP_TEST("no ptxas on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin");
  const ptxas::Version v = ptxas::version(found);
  REQUIRE(v.release >= 12000);
  CHECK_THAT(v.text, Catch::Matches(R"(\d+\.\d+\.\d+)"));
  // auto takes it for a driver at least as new, and not for an older one (its cubin may not load).
  const rt::Assembler newer = rt::choose_assembler("auto", v.release);
  CHECK(newer.ptxas == found);
  CHECK(newer.id() == "ptxas " + v.text);
  const rt::Assembler older = rt::choose_assembler("auto", v.release - 10);
  CHECK(older.ptxas.empty());
  CHECK_THAT(older.why, Catch::Contains("auto takes 12.0 up to the driver's"));
  // A path is taken as given, whatever the driver.
  CHECK(rt::choose_assembler(found, 11000).ptxas == found);
}

TEST_CASE("assembler: ptxas turns PTX into a cubin and reports what it rejects", "[assembler]") {
  const std::string found = ptxas::find();
  if (found.empty()) SKIP_TEST("no ptxas on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin");
  const ptxas::Result ok = ptxas::assemble(found, kEmptyKernel, "sm_80", /*want_cubin=*/true);
  CHECK(ok.ran);
  CHECK(ok.ok);
  REQUIRE(ok.cubin.size() > 4);
  CHECK(ok.cubin.compare(0, 4, "\x7f" "ELF") == 0);
  CHECK_THAT(ok.log, Catch::Contains("entry function 'k'"));
  std::string bad = kEmptyKernel;
  bad.replace(bad.find("ret;"), 4, "not_an_instruction;");
  const ptxas::Result no = ptxas::assemble(found, bad, "sm_80", true);
  CHECK(no.ran);
  CHECK_FALSE(no.ok);
  CHECK(no.cubin.empty());
  CHECK_THAT(no.log, Catch::Contains("not_an_instruction"));
  // A program that does not exist did not run.
  const ptxas::Result none = ptxas::assemble("/nonexistent/ptxas", kEmptyKernel, "sm_80", true);
  CHECK_FALSE(none.ran);
  CHECK_FALSE(none.ok);
}

TEST_CASE("assembler: an assembler's exit status and a signal that ended it are told apart", "[assembler]") {
  test::TempDir d;
  // ptxas exits with 255 on an option it does not know: an exit status, not signal 127.
  const ptxas::Result exited =
      ptxas::assemble(script(d, "exits", "echo unknown option; exit 255"), kEmptyKernel, "sm_80", true);
  CHECK(exited.ran);
  CHECK_FALSE(exited.ok);
  CHECK_THAT(exited.log, Catch::Contains("unknown option") && !Catch::Contains("signal"));
  const ptxas::Result killed = ptxas::assemble(script(d, "killed", "kill -KILL $$"), kEmptyKernel, "sm_80", true);
  CHECK(killed.ran);
  CHECK_FALSE(killed.ok);
  CHECK_THAT(killed.log, Catch::Contains("was ended by signal 9"));
}

// A plan's assembler level reaches ptxas as -O<level> before the input, and ptxas' own default
// (3) is left unsaid; a real ptxas, when there is one, assembles at -O1.
TEST_CASE("assembler: a ptxas job passes an optimisation level other than 3 as -O", "[assembler]") {
  test::TempDir d;
  const std::string echo = script(d, "echoes", "echo \"$@\"; cat > \"$4\"");
  const ptxas::Result o1 = ptxas::Job(echo, "sm_90a", true, 1).finish(kEmptyKernel);
  CHECK(o1.ok);
  CHECK_THAT(o1.log, Catch::Matches(R"(-v -arch=sm_90a -o \S+ -O1 \S+\n)"));
  const ptxas::Result o3 = ptxas::Job(echo, "sm_90a", true).finish(kEmptyKernel);
  CHECK(o3.ok);
  CHECK_THAT(o3.log, Catch::Matches(R"(-v -arch=sm_90a -o \S+ \S+\n)"));
  const std::string found = ptxas::find();
  if (found.empty()) SKIP_TEST("no ptxas on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin");
  const ptxas::Result real = ptxas::assemble(found, kEmptyKernel, "sm_80", true, 1);
  CHECK(real.ok);
  CHECK(real.cubin.size() > 4);
}

TEST_CASE("assembler: a ptxas job started before its PTX gets it whole on stdin, and one never finished is killed",
          "[assembler]") {
  test::TempDir d;
  // Arguments: -v -arch=ARCH -o CUBIN INPUT. This stand-in "assembles" its input into the cubin as it is.
  std::string big(3 << 20, 'x');  // larger than a pipe's buffer: the writes interleave with its reads
  big.replace(0, std::strlen(kEmptyKernel), kEmptyKernel);
  {
    ptxas::Job job(script(d, "copies", "cat > \"$4\""), "sm_80", true);
    const ptxas::Result r = job.finish(big);
    CHECK(r.ran);
    CHECK(r.ok);
    CHECK(r.cubin == big);
    CHECK(job.finish(big).log == "internal error: a ptxas job was finished twice\n");
  }
  // One that exits before reading: an exit status, not a SIGPIPE that would end this process.
  const ptxas::Result early =
      ptxas::Job(script(d, "leaves", "echo no input wanted; exit 3"), "sm_80", true).finish(big);
  CHECK(early.ran);
  CHECK_FALSE(early.ok);
  CHECK_THAT(early.log, Catch::Contains("no input wanted"));
  // Never finished (LLVM failed meanwhile): the program is killed and reaped, not left running.
  // It sleeps 60 s: a destructor that waited for it instead of killing it would take that long.
  const std::string pid_file = d.path + "/pid";
  pid_t pid = 0;
  std::chrono::steady_clock::time_point dropped;
  {
    ptxas::Job job(script(d, "waits", "echo $$ > '" + pid_file + "'; exec sleep 60"), "sm_80", true);
    for (int i = 0; i < 500 && pid <= 0; ++i) {
      std::ifstream(pid_file) >> pid;
      if (pid <= 0) ::usleep(10000);
    }
    REQUIRE(pid > 0);
    CHECK(::kill(pid, 0) == 0);
    dropped = std::chrono::steady_clock::now();
  }
  CHECK(std::chrono::steady_clock::now() - dropped < std::chrono::seconds(20));
  CHECK(::kill(pid, 0) == -1);
  CHECK(errno == ESRCH);
  // A real ptxas, when there is one: started first, then handed the PTX.
  const std::string found = ptxas::find();
  if (found.empty()) SKIP_TEST("no ptxas on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin");
  ptxas::Job job(found, "sm_80", true);
  const ptxas::Result ok = job.finish(kEmptyKernel);
  CHECK(ok.ok);
  REQUIRE(ok.cubin.size() > 4);
  CHECK(ok.cubin.compare(0, 4,
                         "\x7f"
                         "ELF") == 0);
  CHECK_THAT(ok.log, Catch::Contains("entry function 'k'"));
}

// write_file_atomic (support/atomic_file.hpp): regular files replaced whole, symlinks written
// through, devices and FIFOs written in place and never replaced, guessed temp names never followed.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "flashjit/flashjit.hpp"
#include "helpers.hpp"
#include "support/atomic_file.hpp"

using flashjit::write_file_atomic;
using flashjit::autotune::test::TempDir;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

void put(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

struct stat lstat_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

// Names in `dir` other than `keep`: a leftover temp file shows up here.
std::vector<std::string> others(const std::string& dir, const std::vector<std::string>& keep) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (std::find(keep.begin(), keep.end(), name) == keep.end()) out.push_back(name);
  }
  return out;
}

}  // namespace

TEST_CASE("atomic file: creates and replaces regular files, keeping the replaced file's mode",
          "[support][atomic_file]") {
  TempDir d;
  const std::string path = d.path() + "/out.txt";
  write_file_atomic(path, "one\n");
  CHECK(slurp(path) == "one\n");
  REQUIRE(::chmod(path.c_str(), 0640) == 0);
  write_file_atomic(path, "two\n");
  CHECK(slurp(path) == "two\n");
  CHECK((lstat_of(path).st_mode & 0777) == 0640);
  write_file_atomic(path, "three\n", {.mode = 0644});
  CHECK((lstat_of(path).st_mode & 0777) == 0644);
  CHECK(others(d.path(), {"out.txt"}).empty());
  CHECK_THROWS_WITH(write_file_atomic(d.path() + "/missing/out.txt", "x"),
                    Catch::Contains("cannot create a temp file in '" + d.path() + "/missing'"));
  CHECK_THROWS_WITH(write_file_atomic(d.path(), "x"), Catch::Contains("it is a directory"));
}

TEST_CASE("atomic file: a symlink planted at the old guessable temp name is never followed", "[support][atomic_file]") {
  TempDir d;
  const std::string victim = d.path() + "/victim", out = d.path() + "/out.ptx";
  put(victim, "victim\n");
  // The name the writers used before mkstemp: <out>.tmp.<pid>.
  const std::string planted = out + ".tmp." + std::to_string(::getpid());
  REQUIRE(::symlink(victim.c_str(), planted.c_str()) == 0);
  write_file_atomic(out, "new\n");
  CHECK(slurp(victim) == "victim\n");
  CHECK(slurp(out) == "new\n");
  CHECK(S_ISLNK(lstat_of(planted).st_mode));
}

TEST_CASE("atomic file: a symlink is written through as cp does, and the link stays", "[support][atomic_file]") {
  TempDir d;
  std::filesystem::create_directory(d.path() + "/elsewhere");
  const std::string target = d.path() + "/elsewhere/real.txt", link = d.path() + "/link.txt";
  put(target, "old\n");
  REQUIRE(::symlink("elsewhere/real.txt", link.c_str()) == 0);
  write_file_atomic(link, "new\n");
  REQUIRE(S_ISLNK(lstat_of(link).st_mode));
  CHECK(std::filesystem::read_symlink(link) == "elsewhere/real.txt");
  CHECK(slurp(target) == "new\n");
  CHECK(others(d.path(), {"elsewhere", "link.txt"}).empty());
  CHECK(others(d.path() + "/elsewhere", {"real.txt"}).empty());

  const std::string dangling = d.path() + "/dangling.txt";
  REQUIRE(::symlink("nowhere.txt", dangling.c_str()) == 0);
  CHECK_THROWS_WITH(write_file_atomic(dangling, "x"), Catch::Contains("dangling symlink '" + dangling + "'"));
  CHECK(S_ISLNK(lstat_of(dangling).st_mode));
  CHECK_FALSE(std::filesystem::exists(d.path() + "/nowhere.txt"));
}

TEST_CASE("atomic file: a FIFO, then /dev/null, are written in place and never replaced", "[support][atomic_file]") {
  TempDir d;
  const std::string fifo = d.path() + "/pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });  // opening for reading blocks until the writer opens
  write_file_atomic(fifo, "through the pipe\n");
  reader.join();
  CHECK(got == "through the pipe\n");
  REQUIRE(S_ISFIFO(lstat_of(fifo).st_mode));
  REQUIRE(others(d.path(), {"pipe"}).empty());

  // Only once the FIFO shows that devices are written in place: /dev/null itself, which a rename
  // would turn into a regular file for every process on the machine.
  struct stat before {};
  if (::lstat("/dev/null", &before) != 0 || !S_ISCHR(before.st_mode)) return;
  write_file_atomic("/dev/null", "discarded\n");
  const struct stat after = lstat_of("/dev/null");
  CHECK(S_ISCHR(after.st_mode));
  CHECK(after.st_rdev == before.st_rdev);
  CHECK(after.st_ino == before.st_ino);
}

TEST_CASE("atomic file: a write error on a device names the device and the errno text", "[support][atomic_file]") {
  struct stat before {};
  if (::lstat("/dev/full", &before) != 0 || !S_ISCHR(before.st_mode)) return;  // no /dev/full here
  CHECK_THROWS_WITH(write_file_atomic("/dev/full", "x"),
                    Catch::Contains("cannot write '/dev/full'") && Catch::Contains(std::strerror(ENOSPC)));
  CHECK(S_ISCHR(lstat_of("/dev/full").st_mode));
}

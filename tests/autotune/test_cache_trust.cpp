// A cache another user could write is never loaded from (its kernels would run as ours), lock
// files are opened without following links, and flashjit's own folders are never group-writable.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "autotune/cache_trust.hpp"
#include "autotune/durable_file.hpp"
#include "helpers.hpp"

namespace fs = std::filesystem;

namespace flashjit::autotune::test {
namespace {

std::string key(const std::string& spec) { return sample_key("0.1.0", 13000, spec, "bm64_bn64_w4_s2"); }

}  // namespace

TEST_CASE("cache trust: a root or folder writable by others, or owned by another user, is refused with the fix",
          "[autotune][cache][trust]") {
  TempDir dir;
  const std::string root = dir.path() + "/cache", kernels = root + "/kernels";
  CompileCache cc(root);
  REQUIRE(cc.put(key("a"), sample_artifacts("a")));
  REQUIRE(cc.get(key("a")));
  struct Case {
    std::string folder;
    mode_t mode;
    uid_t owner;
    const char* says;  // "" = trusted
  };
  const uid_t me = ::geteuid();
  const Case cases[] = {
      {root, 0777, me, "writable by every user"},
      {root, 0775, me, "writable by its group"},
      {kernels, 0757, me, "writable by every user"},
      {root, 01777, me, ""},  // sticky, as /tmp: others cannot replace our files
      {root, 0700, me, ""},
      {root, 0755, 12345, "owned by uid 12345"},
  };
  for (const Case& c : cases) {
    INFO(c.folder << " mode " << std::oct << c.mode << std::dec << " owner " << c.owner);
    TempDir fresh;  // a new folder name per case: the warning is once per folder and process
    const std::string moved = fresh.path() + "/cache";
    fs::rename(root, moved);
    const std::string folder = moved + c.folder.substr(root.size());
    CompileCache here(moved);
    if (c.owner != me && ::chown(folder.c_str(), c.owner, -1) != 0) {
      WARN("cannot chown (not root): the owner case is not checked");
      fs::rename(moved, root);
      continue;
    }
    REQUIRE(::chmod(folder.c_str(), c.mode) == 0);
    {
      StderrCapture err;
      const bool hit = here.get(key("a")).has_value();
      const std::string text = err.text();
      if (*c.says == '\0') {
        CHECK(hit);
        CHECK(text.empty());
      } else {
        CHECK_FALSE(hit);
        CHECK_THAT(text, Catch::Contains(folder) && Catch::Contains(c.says));
        CHECK_FALSE(here.put(key("b"), sample_artifacts("b")));  // nor stored into
        TuningCache tc(moved, "0.1.0");
        if (c.folder == root) CHECK_THROWS_WITH(tc.store(sample_gpu(), sample_tuning_key("k"), sample_entry(64, 1.0)),
                                                Catch::Contains(c.says));
      }
    }
    REQUIRE(::chown(folder.c_str(), me, -1) == 0);
    REQUIRE(::chmod(folder.c_str(), 0755) == 0);
    fs::rename(moved, root);
  }
  CHECK(untrusted_cache_folder(kernels).empty());
  CHECK(cc.get(key("a")));
}

TEST_CASE("cache trust: folders flashjit creates are not group- or other-writable whatever the umask",
          "[autotune][cache][trust]") {
  TempDir dir;
  const mode_t old = ::umask(0);
  make_cache_dirs(dir.path() + "/a/b/c");
  ::umask(old);
  for (const char* f : {"/a", "/a/b", "/a/b/c"}) {
    struct stat st {};
    REQUIRE(::stat((dir.path() + f).c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0755);
  }
  CHECK(untrusted_cache_folder(dir.path() + "/a/b/c").empty());
}

TEST_CASE("file lock: a symlink or FIFO planted at the lock's name is refused, and nothing is created through it",
          "[autotune][cache][trust]") {
  TempDir dir;
  const std::string victim = dir.path() + "/victim", lock = dir.path() + "/x.yaml.lock";
  REQUIRE(::symlink(victim.c_str(), lock.c_str()) == 0);
  CHECK_THROWS_WITH(FileLock(lock), Catch::Contains("symbolic link"));
  CHECK_FALSE(fs::exists(victim));
  fs::remove(lock);
  REQUIRE(::mkfifo(lock.c_str(), 0644) == 0);
  CHECK_THROWS_WITH(FileLock(lock), Catch::Contains("not a regular file"));
  fs::remove(lock);
  { FileLock ok(lock); }
  CHECK(fs::is_regular_file(lock));
}

TEST_CASE("compile cache: a byte changed in an entry's body is a checksum mismatch: a miss and one warning",
          "[autotune][cache][trust]") {
  TempDir dir;
  CompileCache cc(dir.path());
  REQUIRE(cc.put(key("a"), sample_artifacts("a", 5000)));
  const std::string path = cc.path_for(key("a"));
  std::string bytes = read_file_status(path).content;
  REQUIRE(bytes.size() > 200);
  bytes[bytes.size() - 100] ^= 0x20;  // in the PTX/cubin sections, after the header
  write_file_durable(path, bytes);
  StderrCapture err;
  CHECK_FALSE(cc.get(key("a")));
  CHECK(err.warnings() == 1);
  CHECK_THAT(err.text(), Catch::Contains("checksum mismatch"));
}

}  // namespace flashjit::autotune::test

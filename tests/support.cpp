#include "tests/support.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "flashjit/tuning.hpp"

namespace flashjit::test {

size_t kernel_files(const std::string& root) {
  size_t n = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(root + "/kernels", ec), end; !ec && it != end; it.increment(ec))
    n += it->path().extension() == ".fjk";
  return n;
}

Command run_command(const std::string& cmd) {
  Command c;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return c;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) c.output.append(buf, n);
  int status = pclose(p);
  c.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return c;
}

TempDir::TempDir() {
  char t[] = "/tmp/flashjit-test-XXXXXX";
  path = mkdtemp(t);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

ScopedCacheDir::ScopedCacheDir() { set_cache_dir(dir.path); }
ScopedCacheDir::~ScopedCacheDir() { set_cache_dir(""); }

}  // namespace flashjit::test

#include "support/ptxas.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <vector>

#include "support/atomic_file.hpp"
#include "support/file_read.hpp"

extern char** environ;

namespace flashjit::ptxas {
namespace {

// Runs `argv` with stdout and stderr into `log_path`; the exit status (0-255), kSignalled + the
// signal when one ended it, or -1 when it did not start. Not 128 + the signal, as a shell reports
// it: ptxas exits with 255 on a bad option, which would read as signal 127.
constexpr int kSignalled = 256;

int run(const std::vector<std::string>& argv, const std::string& log_path) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int started = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (started != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : kSignalled + WTERMSIG(status);
}

struct TempDir {
  std::string path;
  TempDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && t[0] == '/' ? t : "/tmp") + "/flashjit-ptxas-XXXXXX";
    if (::mkdtemp(tmpl.data())) path = tmpl;
  }
  ~TempDir() {
    if (path.empty()) return;
    for (const char* f : {"/k.ptx", "/k.cubin", "/log.txt"}) std::remove((path + f).c_str());
    ::rmdir(path.c_str());
  }
};

std::string read_small(const std::string& path, size_t limit) {
  BoundedRead r = read_file_bounded(path, limit);
  return r.status == BoundedRead::Status::ok ? r.content : std::string();
}

}  // namespace

std::vector<std::string> find_all() {
  std::vector<std::string> dirs, found;
  if (const char* p = std::getenv("PATH")) {
    std::stringstream ss(p);
    for (std::string d; std::getline(ss, d, ':');) dirs.push_back(d);
  }
  if (const char* c = std::getenv("CUDA_HOME")) dirs.push_back(std::string(c) + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  for (const std::string& d : dirs) {
    const std::string cand = d + "/ptxas";
    if (!d.empty() && ::access(cand.c_str(), X_OK) == 0) found.push_back(cand);
  }
  return found;
}

std::string find() {
  const std::vector<std::string> all = find_all();
  return all.empty() ? "" : all.front();
}

Version version(const std::string& path) {
  Version v;
  TempDir dir;
  if (dir.path.empty()) return v;
  const std::string log = dir.path + "/log.txt";
  if (run({path, "--version"}, log) != 0) return v;
  std::smatch m;
  const std::string text = read_small(log, 1 << 16);
  if (std::regex_search(text, m, std::regex(R"(release (\d+)\.(\d+), V([0-9.]+))"))) {
    v.text = m[3];
    v.release = 1000 * std::stoi(m[1]) + 10 * std::stoi(m[2]);
  }
  return v;
}

Result assemble(const std::string& path, const std::string& ptx, const std::string& arch, bool want_cubin) {
  Result r;
  TempDir dir;
  if (dir.path.empty()) {
    r.log = "cannot create a temporary folder for ptxas under $TMPDIR or /tmp\n";
    return r;
  }
  const std::string in = dir.path + "/k.ptx", out = dir.path + "/k.cubin", log = dir.path + "/log.txt";
  try {
    write_file_atomic(in, ptx);
  } catch (const std::exception& e) {  // a full /tmp: reported as a ptxas failure, not a truncated input
    r.log = std::string(e.what()) + "\n";
    return r;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int status = run({path, "-v", "-arch=" + arch, "-o", out, in}, log);
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.ran = status >= 0;
  r.log = read_small(log, 1 << 20);
  if (!r.ran) r.log += path + " could not be started\n";
  else if (status >= kSignalled)
    r.log += path + " was ended by signal " + std::to_string(status - kSignalled) + "\n";
  r.ok = status == 0;
  if (r.ok && want_cubin) {
    BoundedRead c = read_file_bounded(out, kMaxModuleBytes);
    if (c.status != BoundedRead::Status::ok || c.content.empty()) {
      r.ok = false;
      r.log += "ptxas exited 0 but its cubin " + out + " could not be read\n";
    } else {
      r.cubin = std::move(c.content);
    }
  }
  return r;
}

}  // namespace flashjit::ptxas

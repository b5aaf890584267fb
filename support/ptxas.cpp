#include "support/ptxas.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
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

#include "support/file_read.hpp"

extern char** environ;

namespace flashjit::ptxas {
namespace {

// Starts `argv` with stdout and stderr into `log_path` and, when `stdin_fd` >= 0, that descriptor
// as its standard input; the pid, or -1 when it did not start.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log_path, int stdin_fd) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdin_fd >= 0) posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int started = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return started == 0 ? pid : -1;
}

// The exit status (0-255) of `pid`, kSignalled + the signal when one ended it, or -1 when it cannot
// be waited for. Not 128 + the signal, as a shell reports it: ptxas exits with 255 on a bad option,
// which would read as signal 127.
constexpr int kSignalled = 256;

int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : kSignalled + WTERMSIG(status);
}

int run(const std::vector<std::string>& argv, const std::string& log_path) {
  const pid_t pid = spawn(argv, log_path, -1);
  return pid < 0 ? -1 : reap(pid);
}

// Writes `data` to the pipe `fd` until done or the reader is gone (EPIPE: its exit status and log
// say why). SIGPIPE is blocked in this thread meanwhile, and one it raised is taken back, so that a
// reader that exited early (ptxas on a bad option) is an error here, not the end of the caller.
void write_all(int fd, const std::string& data) {
  sigset_t pipe_signal, old_mask, pending;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &old_mask);
  sigpending(&pending);
  const bool already_pending = sigismember(&pending, SIGPIPE);
  bool broken = false;
  for (size_t at = 0; at < data.size();) {
    const ssize_t n = ::write(fd, data.data() + at, data.size() - at);
    if (n > 0) {
      at += size_t(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      broken = n < 0 && errno == EPIPE;
      break;
    }
  }
  if (broken && !already_pending) {
    const timespec now{0, 0};
    sigtimedwait(&pipe_signal, nullptr, &now);
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
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
    for (const char* f : {"/k.cubin", "/log.txt"}) std::remove((path + f).c_str());
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

struct Job::State {
  TempDir dir;  // first, so that it goes last: after the program is reaped
  std::string path, out, log;
  bool want_cubin = false, finished = false;
  pid_t pid = -1;  // -1: not started, or reaped
  int pipe = -1;   // our end of the program's standard input
};

// The input is named /dev/stdin rather than "-": ptxas reads "-" before it initialises and a path
// after, so only a path lets the start-up run while the PTX is generated (bench/ptxas_startup.py
// on the build machine: 27 ms of an empty kernel's 47 hidden, against 16 of 55 with "-";
// docs/perf-notes.md §56). Opening /dev/stdin reopens the descriptor, which works for a pipe but
// not a socket.
Job::Job(const std::string& path, const std::string& arch, bool want_cubin, int level) : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.path = path;
  s.want_cubin = want_cubin;
  if (s.dir.path.empty()) return;
  s.out = s.dir.path + "/k.cubin";
  s.log = s.dir.path + "/log.txt";
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  const char* input = ::access("/dev/stdin", F_OK) == 0 ? "/dev/stdin" : "-";
  std::vector<std::string> argv = {path, "-v", "-arch=" + arch, "-o", s.out};
  if (level != 3) argv.push_back("-O" + std::to_string(level));
  argv.push_back(input);
  s.pid = spawn(argv, s.log, fds[0]);
  ::close(fds[0]);
  if (s.pid < 0)
    ::close(fds[1]);
  else
    s.pipe = fds[1];
}

Job::~Job() {
  if (s_->pipe >= 0) ::close(s_->pipe);
  if (s_->pid >= 0) {
    ::kill(s_->pid, SIGKILL);
    reap(s_->pid);
  }
}

Result Job::finish(const std::string& ptx) {
  State& s = *s_;
  Result r;
  if (s.finished) {
    r.log = "internal error: a ptxas job was finished twice\n";
    return r;
  }
  s.finished = true;
  if (s.dir.path.empty()) {
    r.log = "cannot create a temporary folder for ptxas under $TMPDIR or /tmp\n";
    return r;
  }
  if (s.pid < 0) {
    r.log = s.path + " could not be started\n";
    return r;
  }
  const auto t0 = std::chrono::steady_clock::now();
  write_all(s.pipe, ptx);
  ::close(s.pipe);
  s.pipe = -1;
  const int status = reap(s.pid);
  s.pid = -1;
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.ran = true;
  r.log = read_small(s.log, 1 << 20);
  if (status < 0)
    r.log += s.path + " could not be waited for\n";
  else if (status >= kSignalled)
    r.log += s.path + " was ended by signal " + std::to_string(status - kSignalled) + "\n";
  r.ok = status == 0;
  if (r.ok && s.want_cubin) {
    BoundedRead c = read_file_bounded(s.out, kMaxModuleBytes);
    if (c.status != BoundedRead::Status::ok || c.content.empty()) {
      r.ok = false;
      r.log += "ptxas exited 0 but its cubin " + s.out + " could not be read\n";
    } else {
      r.cubin = std::move(c.content);
    }
  }
  return r;
}

Result assemble(const std::string& path, const std::string& ptx, const std::string& arch, bool want_cubin, int level) {
  return Job(path, arch, want_cubin, level).finish(ptx);
}

}  // namespace flashjit::ptxas

#include "helpers.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "autotune/durable_file.hpp"

extern char** environ;

namespace flashjit::autotune::test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/flashjit-autotune-test.XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

StderrCapture::StderrCapture() {
  char tmpl[] = "/tmp/flashjit-stderr.XXXXXX";
  int fd = ::mkstemp(tmpl);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  file_ = tmpl;
  std::fflush(stderr);
  saved_ = ::dup(2);
  ::dup2(fd, 2);
  ::close(fd);
}

StderrCapture::~StderrCapture() { text(); }

std::string StderrCapture::text() {
  if (!done_) {
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    ReadResult r = read_file_status(file_);
    text_ = r.content;
    ::unlink(file_.c_str());
    done_ = true;
  }
  return text_;
}

int StderrCapture::warnings() {
  const std::string& t = text();
  int n = 0;
  for (size_t at = t.find("[flashjit warn]"); at != std::string::npos; at = t.find("[flashjit warn]", at + 1)) ++n;
  return n;
}

KernelArtifacts sample_artifacts(const std::string& seed, size_t ptx_bytes) {
  KernelArtifacts a;
  a.entry = "flashjit_fwd_" + seed;
  a.threads = 128;
  a.shared_bytes = 16384;
  a.registers = 96;
  a.spill_bytes = 0;
  a.created_unix = 1764000000;
  a.ptx = "// ptx for " + seed + "\n.version 8.0\n.target sm_90a\n";
  uint64_t x = std::hash<std::string>{}(seed);
  while (a.ptx.size() < ptx_bytes) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    a.ptx += char('a' + (x >> 59) % 26);
  }
  for (int i = 0; i < 300; ++i) a.cubin += char((x >> (i % 56)) & 0xff);  // binary bytes, NULs included
  a.cubin += std::string("\0ELF", 4);
  return a;
}

std::string sample_key(const std::string& flashjit_version, int driver, const std::string& spec, const std::string& config) {
  return "flashjit " + flashjit_version + "\ncache-format 1\nllvm 19.1.7\nptx 8.0\narch sm_90a\ndriver " +
         std::to_string(driver) + "\nspec " + spec + "\nconfig " + config + "\nknobs \n";
}

GpuIdentity sample_gpu(int driver) { return {"NVIDIA H200", 132, 9, 0, driver}; }

TuningKey sample_tuning_key(const std::string& spec_hash, int64_t seq) {
  return {spec_hash, ShapeBucket::of(4, 16, seq, seq, 128, 128)};
}

TuningEntry sample_entry(int block_m, double median_ms, const std::string& spec_name) {
  TuningEntry e;
  e.spec_name = spec_name;
  e.best = TileConfig{block_m, 64, 4, 2};
  e.median_ms = median_ms;
  e.p20_ms = median_ms * 0.98;
  e.p80_ms = median_ms * 1.03;
  e.runners_up = {TrialRecord{TileConfig{64, 32, 4, 1}, true, median_ms * 1.5, ""},
                  TrialRecord{TileConfig{128, 128, 8, 3}, false, 0, "ptxas: 312 registers > 255 (\"spills\")"}};
  e.date = "2026-12-01T10:20:30Z";
  e.mode = "quick";
  return e;
}

bool same_entry(const TuningEntry& a, const TuningEntry& b) {
  if (a.spec_name != b.spec_name || !same_config(a.best, b.best) || a.median_ms != b.median_ms ||
      a.p20_ms != b.p20_ms || a.p80_ms != b.p80_ms || a.date != b.date || a.flashjit_version != b.flashjit_version ||
      a.mode != b.mode || a.num_splits != b.num_splits || a.runners_up.size() != b.runners_up.size())
    return false;
  for (size_t i = 0; i < a.runners_up.size(); ++i) {
    const TrialRecord &x = a.runners_up[i], &y = b.runners_up[i];
    if (!same_config(x.config, y.config) || x.ok != y.ok || x.median_ms != y.median_ms || x.failure != y.failure)
      return false;
  }
  return true;
}

bool same_artifacts(const KernelArtifacts& a, const KernelArtifacts& b) {
  return a.entry == b.entry && a.threads == b.threads && a.shared_bytes == b.shared_bytes &&
         a.registers == b.registers && a.spill_bytes == b.spill_bytes && a.created_unix == b.created_unix &&
         a.ptx == b.ptx && a.cubin == b.cubin;
}

llvm::json::Value parse_json(const std::string& text) {
  llvm::Expected<llvm::json::Value> v = llvm::json::parse(text);
  if (!v) throw std::runtime_error("not JSON (" + llvm::toString(v.takeError()) + "): " + text);
  return std::move(*v);
}

int spawn_self(const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<std::string> words = {"/proc/self/exe"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("posix_spawn failed: " + std::string(std::strerror(rc)));
  return pid;
}

int wait_child(int pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1000;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? -WTERMSIG(status) : -1000;
}

}  // namespace flashjit::autotune::test

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "tools/cli.hpp"

namespace flashjit::cli {

bool Args::has(const std::string& flag) const {
  for (auto& [k, v] : options)
    if (k == flag) return true;
  return false;
}

std::optional<std::string> Args::get(const std::string& flag) const {
  for (auto& [k, v] : options)
    if (k == flag) return v;
  return std::nullopt;
}

int64_t Args::get_int(const std::string& flag, int64_t fallback) const {
  auto v = get(flag);
  if (!v) return fallback;
  char* end = nullptr;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || x < 0)
    throw Error(ErrorKind::usage, flag + " expects a non-negative integer, got '" + *v + "'");
  return x;
}

Args parse_args(int argc, char** argv, int first, const std::vector<std::string>& with_value,
                const std::vector<std::string>& switches) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string w = argv[i];
    if (w.size() < 2 || w[0] != '-' || w == "--") {
      a.positional.push_back(w);
      continue;
    }
    std::string value;
    if (auto eq = w.find('='); eq != std::string::npos) {
      value = w.substr(eq + 1);
      w = w.substr(0, eq);
    }
    bool takes = false, known = false;
    for (auto& f : with_value) if (f == w) takes = known = true;
    for (auto& f : switches) if (f == w) known = true;
    if (!known) {
      std::string all;
      for (auto& f : with_value) all += " " + f;
      for (auto& f : switches) all += " " + f;
      throw Error(ErrorKind::usage, "unknown option " + w + "; allowed:" + all);
    }
    if (takes && value.empty()) {
      if (i + 1 >= argc) throw Error(ErrorKind::usage, w + " needs a value");
      value = argv[++i];
    }
    a.options.emplace_back(w, value);
  }
  return a;
}

AttentionSpec load_spec_arg(const std::optional<std::string>& path) {
  if (!path) return default_spec();
  std::ifstream f(*path);
  if (!f) throw Error(ErrorKind::spec, "cannot read spec file '" + *path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return AttentionSpec::from_yaml(ss.str(), *path);
}

int exit_code_for(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::spec:
    case ErrorKind::usage: return kUsage;
    case ErrorKind::no_gpu: return kNoGpu;
    case ErrorKind::cuda: return kFailure;
    case ErrorKind::compile:
    case ErrorKind::internal: return kInternal;
  }
  return kInternal;
}

void write_output(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      throw Error(ErrorKind::usage, "cannot write '" + tmp + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(ErrorKind::usage, "cannot replace '" + path + "'");
  }
}

std::string find_ptxas() {
  std::vector<std::string> dirs;
  if (const char* p = std::getenv("PATH")) {
    std::stringstream ss(p);
    for (std::string d; std::getline(ss, d, ':');) dirs.push_back(d);
  }
  if (const char* c = std::getenv("CUDA_HOME")) dirs.push_back(std::string(c) + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  for (auto& d : dirs) {
    std::string cand = d + "/ptxas";
    if (!d.empty() && ::access(cand.c_str(), X_OK) == 0) return cand;
  }
  return "";
}

PtxasReport run_ptxas(const std::string& ptx, const std::string& arch) {
  PtxasReport r;
  std::string ptxas = find_ptxas();
  if (ptxas.empty()) return r;
  char dir_template[] = "/tmp/flashjit-ptxas-XXXXXX";
  if (!mkdtemp(dir_template)) return r;
  std::string dir = dir_template, in = dir + "/k.ptx", out = dir + "/k.cubin";
  { std::ofstream(in) << ptx; }
  std::string cmd = "'" + ptxas + "' -v -arch=" + arch + " -o '" + out + "' '" + in + "' 2>&1";
  r.ran = true;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) r.log.append(buf, n);
    int status = pclose(p);
    r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::smatch m;
  if (std::regex_search(r.log, m, std::regex(R"(Used (\d+) registers)"))) r.registers = std::stoi(m[1]);
  if (std::regex_search(r.log, m, std::regex(R"((\d+) bytes spill stores, (\d+) bytes spill loads)"))) {
    r.spill_stores = std::stoi(m[1]);
    r.spill_loads = std::stoi(m[2]);
  }
  std::remove(in.c_str());
  std::remove(out.c_str());
  ::rmdir(dir.c_str());
  return r;
}

}  // namespace flashjit::cli

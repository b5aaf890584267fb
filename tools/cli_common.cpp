// What the subcommands share: argument validators, tile-config and spec-file parsing, exit codes,
// safe output files, and ptxas for register counts.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "support/atomic_file.hpp"
#include "support/file_read.hpp"
#include "support/ptxas.hpp"
#include "tools/cli.hpp"

namespace flashjit::cli {

namespace {

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

}  // namespace

CLI::Validator integer_in(int64_t min, int64_t max) {
  std::string what = min == 1 ? "a positive integer" : "an integer >= " + std::to_string(min);
  if (max != INT64_MAX) what += " and <= " + std::to_string(max);
  return CLI::Validator(
      [min, max, what](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno == ERANGE || v < min || v > max)
          return "expected " + what + ", got " + in_quotes(text);
        return "";
      },
      "");
}

CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v))
          return "expected a positive number, got " + in_quotes(text);
        return "";
      },
      "");
}

CLI::Validator one_of(std::initializer_list<const char*> allowed) {
  std::vector<std::string> names(allowed.begin(), allowed.end());
  std::string list;
  for (size_t i = 0; i < names.size(); ++i)
    list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return CLI::Validator(
      [names, list](std::string& text) -> std::string {
        for (const std::string& n : names)
          if (text == n) return "";
        return in_quotes(text) + " is not allowed; use " + list;
      },
      "");
}

CLI::Validator parsed_by(std::function<void(const std::string&)> parse) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          parse(text);
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      },
      "");
}

TileConfig parse_tile_config(const std::string& text) {
  TileConfig t;
  int* fields[] = {&t.block_m, &t.block_n, &t.num_warps, &t.num_stages};
  size_t at = 0;
  for (size_t i = 0; i < 4; ++i) {
    const size_t comma = i < 3 ? text.find(',', at) : text.size();
    const std::string item = comma == std::string::npos ? "" : text.substr(at, comma - at);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v > INT_MAX)
      throw Error(ErrorKind::usage, in_quotes(text) + " is not bm,bn,warps,stages (four integers, e.g. 64,64,4,2)");
    *fields[i] = static_cast<int>(v);
    at = comma + 1;
  }
  return t;
}

std::vector<TileConfig> parse_tile_configs(const std::string& text) {
  std::vector<TileConfig> out;
  size_t start = 0;
  for (;;) {
    const size_t semi = text.find(';', start);
    out.push_back(parse_tile_config(text.substr(start, semi == std::string::npos ? std::string::npos : semi - start)));
    if (semi == std::string::npos) return out;
    start = semi + 1;
  }
}

std::string read_spec_file(const std::string& path) {
  BoundedRead r = read_file_bounded(path, kMaxSpecBytes);
  switch (r.status) {
    case BoundedRead::Status::ok: return std::move(r.content);
    case BoundedRead::Status::missing:
      throw Error(ErrorKind::spec, path + ": cannot read the spec file (" + std::strerror(ENOENT) + ")");
    case BoundedRead::Status::too_large:
      throw Error(ErrorKind::spec, path + ": the spec file is larger than the limit of " + size_limit_text(kMaxSpecBytes));
    case BoundedRead::Status::error: break;
  }
  throw Error(ErrorKind::spec, path + ": cannot read the spec file (" + r.error + ")");
}

AttentionSpec load_spec_arg(const std::optional<std::string>& path) {
  if (!path) return default_spec();
  return AttentionSpec::from_yaml(read_spec_file(*path), *path);
}

int exit_code_for(const Error& e) {
  switch (e.kind()) {
    case ErrorKind::spec:
    case ErrorKind::usage: return kUsage;
    case ErrorKind::no_gpu: return kNoGpu;
    case ErrorKind::cuda:
    case ErrorKind::out_of_memory: return kFailure;
    case ErrorKind::compile:
    case ErrorKind::internal: return kInternal;
  }
  return kInternal;
}

void write_output(const std::string& path, const std::string& text) { write_file_atomic(path, text); }

std::string find_ptxas() {
  std::string knob = "auto";
  for (const KnobInfo& k : knobs())
    if (k.name == "FLASHJIT_PTXAS") knob = k.value;
  return knob == "auto" || knob == "driver" ? ptxas::find() : knob;
}

PtxasReport run_ptxas(const std::string& ptx, const std::string& arch, const std::string& entry) {
  PtxasReport r;
  r.path = find_ptxas();
  if (r.path.empty()) return r;
  ptxas::Result run = ptxas::assemble(r.path, ptx, arch, /*want_cubin=*/false);
  r.ran = run.ran;
  r.ok = run.ok;
  r.log = std::move(run.log);
  // ptxas reports each entry after a "Compiling entry function 'NAME'" line, in no fixed order (a
  // module also holds the block-map pre-pass and the split-KV combine): read `entry`'s section.
  const size_t at = r.log.find("entry function '" + entry + "'");
  if (at != std::string::npos) {
    const size_t next = r.log.find("Compiling entry function", at + 1);
    const std::string section = r.log.substr(at, next == std::string::npos ? std::string::npos : next - at);
    std::smatch m;
    if (std::regex_search(section, m, std::regex(R"(Used (\d+) registers)"))) r.registers = std::stoi(m[1]);
    if (std::regex_search(section, m, std::regex(R"((\d+) bytes spill stores, (\d+) bytes spill loads)"))) {
      r.spill_stores = std::stoi(m[1]);
      r.spill_loads = std::stoi(m[2]);
    }
  }
  return r;
}

}  // namespace flashjit::cli

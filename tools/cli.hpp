// The flashjit command-line tool: subcommands and their shared helpers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace flashjit::cli {

// Exit codes (DESIGN §7): sysexits-style so CTest can treat 69 as "skipped".
enum Exit { kOk = 0, kFailure = 1, kUsage = 2, kNoGpu = 69, kInternal = 70 };

// Minimal argument list: positional words and --flag [value] options, with unknown flags rejected.
struct Args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;  // flag → value ("" for switches)
  bool has(const std::string& flag) const;
  std::optional<std::string> get(const std::string& flag) const;
  int64_t get_int(const std::string& flag, int64_t fallback) const;
};
// `with_value` lists flags that take a value; `switches` those that do not. Throws Error(usage).
Args parse_args(int argc, char** argv, int first, const std::vector<std::string>& with_value,
                const std::vector<std::string>& switches);

// SPEC path → spec (a missing file or bad YAML is Error(spec)); no path → default_spec().
AttentionSpec load_spec_arg(const std::optional<std::string>& path);
int exit_code_for(const Error& e);
// Writes `text` to `path` through a temp file and rename: a failed run never clobbers the file.
void write_output(const std::string& path, const std::string& text);
// "ptxas -v" for sm_90a when ptxas is on PATH (or in $CUDA_HOME/bin, /usr/local/cuda/bin); "" otherwise.
std::string find_ptxas();
struct PtxasReport {
  bool ran = false, ok = false;
  int registers = -1, spill_stores = -1, spill_loads = -1;
  std::string log;
};
PtxasReport run_ptxas(const std::string& ptx, const std::string& arch);

int cmd_info(int argc, char** argv);
int cmd_compile(int argc, char** argv);
int cmd_run(int argc, char** argv);

}  // namespace flashjit::cli

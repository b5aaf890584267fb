// The flashjit command-line tool: one CLI11 app whose subcommands are thin programs on the public
// API, and the helpers they share.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace flashjit::cli {

// Exit codes, sysexits-style so that CTest can treat 69 as "skipped".
enum Exit { kOk = 0, kFailure = 1, kUsage = 2, kNoGpu = 69, kInternal = 70 };

// A subcommand: CLI11 parses and validates its arguments (a bad one exits 2 before `run`); `run`
// then does the work and returns the exit code. Errors `run` throws are mapped by exit_code_for.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_info(CLI::App& app);
Command add_check(CLI::App& app);
Command add_compile(CLI::App& app);
Command add_run(CLI::App& app);
Command add_tune(CLI::App& app);
Command add_cache(CLI::App& app);

// ---- argument checks, as CLI11 validators: a failure names the option and what it allows ----------
// (no description of their own: each option's type_name says what it takes)

// An integer in [min, max].
CLI::Validator integer_in(int64_t min, int64_t max = INT64_MAX);
// A finite number > 0.
CLI::Validator positive_number();
// One of `allowed`, exactly.
CLI::Validator one_of(std::initializer_list<const char*> allowed);
// Accepted when `parse` does not throw flashjit::Error; its message explains a rejection.
CLI::Validator parsed_by(std::function<void(const std::string&)> parse);

// "bm,bn,warps,stages" (four integers) → TileConfig; Error(usage) otherwise. Whether the config
// fits the spec and target is the compiler's check.
TileConfig parse_tile_config(const std::string& text);
// "bm,bn,warps,stages[;bm,bn,warps,stages...]" → the configs; Error(usage) naming the bad item.
std::vector<TileConfig> parse_tile_configs(const std::string& text);

// NAME:i32|f32[=DEFAULT] → a param; NAME:i32|f32:DIM[,DIM...] → a tensor (tools/cli_check.cpp).
ParamDecl parse_param(const std::string& text);
TensorDecl parse_tensor(const std::string& text);

// ---- shared by the subcommands --------------------------------------------------------------------

// The text of a spec file; Error(spec) "PATH: cannot read the spec file (reason)".
std::string read_spec_file(const std::string& path);
// SPEC path → spec (a missing file or bad YAML is Error(spec)); no path → default_spec().
AttentionSpec load_spec_arg(const std::optional<std::string>& path);
int exit_code_for(const Error& e);
// Writes `text` to `path` with write_file_atomic: a failed run never clobbers the file, a device
// or FIFO is written in place and a symlink is written through.
void write_output(const std::string& path, const std::string& text);
// The ptxas the CLI's register/spill reports run: the program FLASHJIT_PTXAS names, else the first
// on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin (no GPU needed, so no driver release to choose
// by; with a GPU, `run`'s header names what the runtime chose); "" when none.
std::string find_ptxas();
struct PtxasReport {
  std::string path;  // the program run; "" when none was found
  bool ran = false, ok = false;
  int registers = -1, spill_stores = -1, spill_loads = -1;
  std::string log;
};
// Registers and spills are those of kernel `entry` (the module's main kernel).
PtxasReport run_ptxas(const std::string& ptx, const std::string& arch, const std::string& entry);

}  // namespace flashjit::cli

// flashjit CLI entry: dispatches subcommands and maps errors to exit codes (DESIGN §7).
#include <cstring>
#include <iostream>

#include "compiler/dsl/check_command.hpp"
#include "tools/cli.hpp"
#include "tools/cli_cache.hpp"
#include "tools/cli_tune.hpp"

namespace {

const char* kHelp =
    "usage: flashjit <command> [options]\n"
    "\n"
    "commands:\n"
    "  info                      devices, driver, compute capability, LLVM/PTX versions, cache location\n"
    "  check SPEC... | --expr E  parse and type-check specs or one expression; print the canonical form\n"
    "  compile SPEC              compile a spec to LLVM IR or PTX (--emit llvm|ptx, --arch, --config, -o)\n"
    "  run [SPEC]                compile, run on random inputs, verify against the fp64 reference, time it\n"
    "                            (no SPEC: the built-in default, bf16 d=128 causal)\n"
    "  tune SPEC --shapes BxHxSqxSkv,...     autotune the tile config per shape and store it (--mode quick|full)\n"
    "  cache list|show|clear|export|import   the on-disk kernel and tuning caches\n"
    "\n"
    "`flashjit <command> --help` describes each. Exit codes: 0 ok, 1 failure, 2 usage or spec error,\n"
    "69 no GPU or driver, 70 internal error.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace flashjit::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    std::cout << kHelp;
    return argc < 2 ? kUsage : kOk;
  }
  if (!std::strcmp(argv[1], "--version")) {
    auto v = flashjit::versions();
    std::cout << "flashjit " << v.flashjit << " (LLVM " << v.llvm << ", PTX " << v.ptx_isa << ")\n";
    return kOk;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "info") return cmd_info(argc, argv);
    if (cmd == "check") return flashjit::dsl::run_check_command(argc - 1, argv + 1, std::cout, std::cerr);
    if (cmd == "compile") return cmd_compile(argc, argv);
    if (cmd == "run") return cmd_run(argc, argv);
    if (cmd == "cache") return cmd_cache(argc, argv);
    if (cmd == "tune") return cmd_tune(argc, argv);
    std::cerr << "flashjit: unknown command '" << cmd << "'\n\n" << kHelp;
    return kUsage;
  } catch (const flashjit::Error& e) {
    const int code = exit_code_for(e);
    std::cerr << "flashjit " << cmd << ": " << e.what() << "\n";
    if (code == kNoGpu) std::cerr << "flashjit " << cmd << ": nothing ran (exit 69: no GPU driver or device)\n";
    return code;
  } catch (const std::exception& e) {
    std::cerr << "flashjit " << cmd << ": internal error: " << e.what()
              << "\nThis is a flashjit bug; please report it with the command line and FLASHJIT_LOG=debug output.\n";
    return kInternal;
  }
}

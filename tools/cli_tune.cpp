// Thin adapter: the logic (argument parsing, tuning, summary table) is rt::run_tune_command in
// runtime/tuner.cpp, exported from libflashjit.so so that tests call it without a process.
#include "tools/cli_tune.hpp"

#include <iostream>
#include <string>
#include <vector>

#include "runtime/tuner.hpp"

namespace flashjit::cli {

int cmd_tune(int argc, char** argv) {
  std::vector<std::string> args(argv + 2, argv + argc);
  return rt::run_tune_command(args, std::cout, std::cerr);
}

}  // namespace flashjit::cli

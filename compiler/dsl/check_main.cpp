// Standalone `flashjit_dsl_check`: the `check` subcommand without the rest of the CLI, for
// the front end's own tests and the fuzz/debug loop.
#include <iostream>

#include "compiler/dsl/check_command.hpp"

int main(int argc, char** argv) { return flashjit::dsl::run_check_command(argc, argv, std::cout, std::cerr); }

// Catch2 v2 entry point of the autotune tests, plus a hidden child mode: the concurrency tests
// start this same binary several times as writer processes (see test_concurrency.cpp).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>

#include "helpers.hpp"

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--autotune-child") == 0)
    return flashjit::autotune::test::child_main(argc, argv);
  return Catch::Session().run(argc, argv);
}

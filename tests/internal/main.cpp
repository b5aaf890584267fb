// Runner of the internal tests: Catch2's own main (these tests never need a GPU).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

// Catch2 v2 entry point for the DSL front end's tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

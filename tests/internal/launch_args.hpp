// Shared by the tests of launch-argument checks (runtime/launch.cpp's pack_forward): memory that
// pack_forward only checks and packs, never reads, and the expectation that a launch is refused.
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "compiler/analyzed_spec.hpp"
#include "runtime/launch.hpp"

namespace flashjit::test {

// 256 bytes, 16-byte aligned: the address every tensor, buffer and offset array points into.
inline char* launch_memory() {
  alignas(16) static char memory[256];
  return memory;
}

// A tensor whose rows all alias (strides 0), so every span stays tiny whatever the sizes.
inline Tensor aliasing_tensor() {
  Tensor t;
  t.data = launch_memory();
  t.stride[0] = t.stride[1] = t.stride[2] = 0;
  return t;
}

// pack_forward refuses `a` with Error(usage) whose message contains `words`.
inline void expect_launch_usage(const AttentionSpec& spec, const ForwardArgs& a, const std::string& words) {
  rt::ForwardLaunch launch;
  try {
    rt::pack_forward(*analyze_spec(spec), a, launch);
    FAIL("the launch was accepted");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
    CHECK_THAT(e.what(), Catch::Contains(words));
  }
}

}  // namespace flashjit::test

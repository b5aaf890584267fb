// Masks whose boundaries fall off the tile grid, where tile-range code breaks (a range one tile
// short or long changes only the rows at the boundary): windows of 254 and 257 keys, a window
// looking 130 keys ahead, causal_br with seq_kv − seq_q ≡ 126 (mod 128), prefix(n) with
// n ≡ 1 (mod block_n) — forward and backward, for the heuristic's configs and others either may
// use; and a non-default softmax scale against the reference.
#include <catch2/catch.hpp>

#include <random>

#include "tests/gpu_case.hpp"
#include "tests/support.hpp"

using namespace flashjit;

using test::Case;
using test::make_spec;

namespace {

struct Boundary {
  std::string mask;
  int64_t seq_q, seq_kv;
  std::vector<ParamValue> params;
};

std::vector<Boundary> boundaries() {
  return {{"window(254, 0)", 700, 700, {}},    {"window(257, 0)", 700, 700, {}},
          {"window(1, 130)", 700, 700, {}},    {"causal_br", 130, 256, {}},
          {"causal_br", 300, 554, {}},         {"prefix(n) || causal", 600, 600, {{"n", 129}}},
          {"prefix(n) || causal", 600, 600, {{"n", 65}}}};
}

AttentionSpec spec_for(const Boundary& b, DType dt, int d) {
  AttentionSpec s = make_spec(dt, d, d, b.mask);
  if (!b.params.empty()) s.params = {{"n", ScalarType::i32, 1}};
  return s;
}

}  // namespace

TEST_CASE("gpu boundaries: forward tile ranges off the grid, several tile configs", "[gpu][boundaries]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  const std::optional<TileConfig> configs[] = {std::nullopt, TileConfig{64, 64, 4, 2}, TileConfig{128, 32, 4, 2},
                                               TileConfig{128, 128, 8, 2}, TileConfig{64, 128, 4, 3}};
  for (const Boundary& b : boundaries())
    for (const auto& config : configs) {
      Case c = Case::of(spec_for(b, DType::bf16, 64), b.seq_q, b.seq_kv, 1, 2, 2);
      c.params = b.params;
      c.config = config;
      ref::Verdict v = test::run_case(rt, c, seed++);
      INFO(b.mask << " " << (config ? config->str() : "heuristic") << ": " << v.message);
      CHECK(v.ok);
    }
}

TEST_CASE("gpu boundaries: backward transposed ranges off the grid, several tile configs", "[gpu][boundaries][backward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  const std::optional<TileConfig> configs[] = {std::nullopt, TileConfig{64, 128, 8, 2}, TileConfig{32, 64, 4, 1},
                                               TileConfig{128, 64, 4, 2}};
  for (const Boundary& b : boundaries())
    for (const auto& config : configs) {
      Case c = Case::of(spec_for(b, DType::f16, 64), b.seq_q, b.seq_kv, 1, 2, 2);
      c.params = b.params;
      c.backward_config = config;
      test::BackwardResult r = test::run_backward_case(rt, c, seed++);
      INFO(b.mask << " " << (config ? config->str() : "heuristic") << ": " << r.message);
      CHECK(r.ok);
    }
}

TEST_CASE("gpu boundaries: a non-default scale, forward and backward, against the reference", "[gpu][boundaries]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  for (float scale : {0.05f, 0.3f}) {
    Case c = Case::of(make_spec(DType::bf16, 128, 128, "causal"), 333, 333, 1, 2, 2);
    c.scale = scale;
    ref::Verdict v = test::run_case(rt, c, 21);
    INFO("scale " << scale << ": " << v.message);
    CHECK(v.ok);
    test::BackwardResult r = test::run_backward_case(rt, c, 22);
    INFO("scale " << scale << " backward: " << r.message);
    CHECK(r.ok);
  }
}

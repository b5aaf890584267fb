// The backward kernels on the GPU against the fp64 reference backward (the numerics rule of
// docs/architecture.md, per gradient): fresh random inputs and dO, NaN-poisoned gradients, odd
// lengths, every kind of mask, score modifiers (their derivative chained in), GQA/MQA, BHSD
// strides, non-default scale, rows with no visible key; and bitwise determinism.
#include <catch2/catch.hpp>

#include <random>

#include "tests/gpu_case.hpp"
#include "tests/support.hpp"

using namespace flashjit;

using test::Case;
using test::make_spec;
using test::run_backward_case;

namespace {

AttentionSpec with_tensor(AttentionSpec s, const std::string& name, ScalarType type, std::vector<std::string> dims) {
  s.tensors.push_back({name, type, std::move(dims)});
  return s;
}

void run_all(const std::vector<Case>& cases, bool deterministic = false) {
  Runtime rt = Runtime::create(0);
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  for (const Case& c : cases) {
    test::BackwardResult r = run_backward_case(rt, c, seed++, 0, deterministic);
    INFO(c.spec.canonical() << "sq=" << c.seq_q << " skv=" << c.seq_kv << ": " << r.message);
    CHECK(r.ok);
  }
}

}  // namespace

TEST_CASE("gpu backward: head dims x dtypes x masks, odd lengths", "[gpu][backward]") {
  REQUIRE_GPU_OR_SKIP();
  const std::pair<int, int> dims[] = {{16, 16}, {64, 64}, {72, 72}, {96, 96}, {128, 128}, {160, 160}, {192, 128}, {256, 256}};
  const char* masks[] = {"none", "causal", "causal_br", "window(100, 20)", "kv >= q + 3"};
  const std::pair<int64_t, int64_t> lengths[] = {{113, 203}, {1000, 1000}, {1023, 1023}, {203, 113}};
  std::vector<Case> cases;
  int i = 0;
  for (auto [dqk, dv] : dims)
    for (const char* mask : masks) {
      auto [sq, skv] = lengths[i % 4];
      const DType dt = i % 2 ? DType::f16 : DType::bf16;
      // "kv >= q + 3" leaves the last rows of each head with no visible key: their dQ must be 0.
      cases.push_back(Case::of(make_spec(dt, dqk, dv, mask), sq, skv, dqk >= 192 ? 1 : 2, 2, 2));
      ++i;
    }
  run_all(cases);
}

TEST_CASE("gpu backward: score modifiers, tensor masks, GQA/MQA, strides, scale", "[gpu][backward]") {
  REQUIRE_GPU_OR_SKIP();
  std::vector<Case> cases;
  // Softcap with a small cap, so tanh' is far from 1.
  cases.push_back(Case::of(make_spec(DType::bf16, 128, 128, "causal", "2 * tanh(score / 2)"), 1000, 1000, 2, 2, 2));
  cases.push_back(Case::of(make_spec(DType::f16, 64, 64, "none", "3 * tanh(score / 3)"), 113, 1023, 2, 2, 2));
  AttentionSpec alibi = with_tensor(make_spec(DType::f16, 128, 128, "causal", "score - slope[h] * abs(q - kv)"), "slope",
                                    ScalarType::f32, {"heads_q"});
  cases.push_back(Case::of(alibi, 1023, 1023, 1, 4, 4));
  AttentionSpec doc = with_tensor(make_spec(DType::bf16, 128, 128, "causal && document(doc_id)"), "doc_id", ScalarType::i32,
                                  {"batch", "seq_kv"});
  cases.push_back(Case::of(doc, 1000, 1000, 2, 2, 2));
  AttentionSpec doc64 = with_tensor(make_spec(DType::f16, 64, 64, "document(doc_id)"), "doc_id", ScalarType::i32,
                                    {"batch", "seq_kv"});
  cases.push_back(Case::of(doc64, 777, 777, 1, 2, 1));
  cases.push_back(Case::of(make_spec(DType::bf16, 128, 128, "causal"), 1000, 1000, 1, 8, 1));  // GQA 8:1
  cases.push_back(Case::of(make_spec(DType::f16, 64, 64, "none"), 513, 1023, 2, 4, 1));        // MQA
  cases.push_back(Case::of(make_spec(DType::bf16, 64, 64, "causal"), 300, 333, 2, 4, 2, /*bhsd=*/true));
  Case scaled = Case::of(make_spec(DType::bf16, 128, 128, "window(64, 0)"), 500, 500, 1, 2, 2);
  scaled.scale = 0.3f;
  cases.push_back(scaled);
  // Configs other than the heuristic's: one m-tile and two per warp, one stage.
  Case c1 = Case::of(make_spec(DType::bf16, 64, 64, "causal"), 257, 257, 1, 2, 2);
  c1.backward_config = TileConfig{32, 64, 4, 1};
  cases.push_back(c1);
  Case c2 = Case::of(make_spec(DType::f16, 64, 64, "causal_br"), 130, 256, 1, 2, 2);
  c2.backward_config = TileConfig{64, 128, 4, 2};
  cases.push_back(c2);
  run_all(cases);
}

// The matrices above run each call's default path: dQ summed by the dK/dV kernel where the plan
// allows it (sm_90a, 64-query tiles, d_qk = 128), the dQ kernel elsewhere. These take the dQ kernel
// always (`deterministic`).
TEST_CASE("gpu backward: deterministic calls (the dQ kernel) pass the same checks", "[gpu][backward]") {
  REQUIRE_GPU_OR_SKIP();
  std::vector<Case> cases;
  for (int d : {64, 128})
    for (const char* mask : {"none", "causal", "causal_br", "kv >= q + 3"})
      cases.push_back(Case::of(make_spec(d == 64 ? DType::f16 : DType::bf16, d, d, mask), 1000, 1023, 2, 4, 2));
  cases.push_back(Case::of(make_spec(DType::bf16, 128, 128, "causal"), 113, 203, 1, 8, 1));  // GQA 8:1
  run_all(cases, /*deterministic=*/true);
}

TEST_CASE("gpu backward: 100 runs give bitwise identical gradients", "[gpu][backward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  Case c = Case::of(make_spec(DType::bf16, 128, 128, "causal"), 1024, 1024, 2, 8, 2);
  test::BackwardResult r = run_backward_case(rt, c, 7, /*repeats=*/99);
  INFO(r.message);
  CHECK(r.deterministic);
  CHECK(r.ok);
}

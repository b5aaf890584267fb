// The README's promises at their edges, on the GPU against the fp64 reference: head dims 8 to 56,
// d_qk < d_v, the mma.sync path (CompileOptions::mma = "sync", what FLASHJIT_MMA=sync selects) with
// tensor masks, scores and GQA, strides with padded rows and heads in BSHD and BHSD, and a
// non-default scale with a score modifier — forward and backward.
#include <catch2/catch.hpp>

#include <random>

#include "tests/gpu_case.hpp"
#include "tests/support.hpp"

using namespace flashjit;

using test::Case;
using test::make_spec;

namespace {

AttentionSpec softcap(DType dt, int d, const std::string& mask) {
  AttentionSpec s = make_spec(dt, d, d, mask, "softcap * tanh(score / softcap)");
  s.params = {{"softcap", ScalarType::f32, 30}};
  return s;
}
AttentionSpec alibi(DType dt, int d) {
  AttentionSpec s = make_spec(dt, d, d, "causal", "score - slope[h] * abs(q - kv)");
  s.tensors = {{"slope", ScalarType::f32, {"heads_q"}}};
  return s;
}
AttentionSpec document(DType dt, int d) {
  AttentionSpec s = make_spec(dt, d, d, "causal && document(doc)");
  s.tensors = {{"doc", ScalarType::i32, {"batch", "seq_kv"}}};
  return s;
}

// Each case forward, and backward too where `backward` is set.
struct Run {
  Case c;
  bool backward = false;
};

void run_all(const std::vector<Run>& runs) {
  Runtime rt = Runtime::create(0);
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  for (const Run& r : runs) {
    const Case& c = r.c;
    INFO(c.spec.canonical() << "sq=" << c.seq_q << " skv=" << c.seq_kv << " h=" << c.heads_q << "/" << c.heads_kv << " "
                            << test::layout(c) << " scale=" << c.scale);
    const ref::Verdict v = test::run_case(rt, c, seed++);
    INFO("forward: " << v.message);
    CHECK(v.ok);
    if (!r.backward) continue;
    const test::BackwardResult b = test::run_backward_case(rt, c, seed++);
    INFO("backward: " << b.message);
    CHECK(b.ok);
  }
}

}  // namespace

TEST_CASE("gpu matrix: head dims 8 to 56 and d_qk < d_v", "[gpu][matrix]") {
  REQUIRE_GPU_OR_SKIP();
  std::vector<Run> runs;
  const char* masks[] = {"none", "causal", "causal_br", "window(70, 5)"};
  int i = 0;
  for (int d : {8, 16, 24, 32, 40, 48, 56}) {
    const DType dt = i % 2 ? DType::f16 : DType::bf16;
    runs.push_back({Case::of(make_spec(dt, d, d, masks[i % 4]), 203, 333, 2, 2, 2), d == 8 || d == 40});
    ++i;
  }
  runs.push_back({Case::of(make_spec(DType::bf16, 64, 128, "causal"), 300, 300, 2, 2, 2), true});
  runs.push_back({Case::of(make_spec(DType::f16, 32, 96, "none"), 113, 203, 1, 4, 2), false});
  runs.push_back({Case::of(make_spec(DType::bf16, 8, 64, "causal_br"), 200, 260, 2, 2, 1), true});
  run_all(runs);
}

TEST_CASE("gpu matrix: the mma.sync path with tensor masks, scores, GQA and scale", "[gpu][matrix]") {
  REQUIRE_GPU_OR_SKIP();
  std::vector<Run> runs;
  runs.push_back({Case::of(document(DType::bf16, 128), 777, 999, 2, 2, 2), true});  // block-map kernel
  Case cap = Case::of(softcap(DType::f16, 64, "none"), 513, 700, 2, 2, 2);
  cap.params = {{"softcap", 20}};
  runs.push_back({cap, false});
  runs.push_back({Case::of(alibi(DType::bf16, 128), 400, 400, 1, 4, 4), false});
  runs.push_back({Case::of(make_spec(DType::f16, 64, 64, "causal"), 1000, 1000, 1, 8, 1), true});  // GQA 8:1
  Case scaled = Case::of(make_spec(DType::bf16, 96, 96, "window(100, 0)"), 333, 333, 2, 2, 2);
  scaled.scale = 0.2f;
  runs.push_back({scaled, false});
  for (Run& r : runs) r.c.mma = "sync";
  run_all(runs);
}

TEST_CASE("gpu matrix: strides with padded rows and heads, BSHD and BHSD", "[gpu][matrix]") {
  REQUIRE_GPU_OR_SKIP();
  std::vector<Run> runs;
  Case bshd = Case::of(make_spec(DType::bf16, 64, 64, "causal"), 300, 333, 2, 4, 2);
  bshd.pad_head = 8, bshd.pad_seq = 16;
  runs.push_back({bshd, true});
  Case bhsd = Case::of(make_spec(DType::f16, 128, 128, "window(200, 0)"), 257, 300, 2, 2, 2, /*bhsd=*/true);
  bhsd.pad_head = 24, bhsd.pad_seq = 8;
  runs.push_back({bhsd, true});
  runs.push_back({Case::of(document(DType::bf16, 64), 500, 500, 2, 4, 1, /*bhsd=*/true), false});  // GQA, tensor mask
  Case sync = Case::of(make_spec(DType::f16, 96, 96, "causal_br"), 130, 256, 1, 2, 2);
  sync.pad_head = 8, sync.pad_seq = 8, sync.mma = "sync";
  runs.push_back({sync, false});
  run_all(runs);
}

TEST_CASE("gpu matrix: a non-default scale with a score modifier and GQA, forward and backward", "[gpu][matrix]") {
  REQUIRE_GPU_OR_SKIP();
  std::vector<Run> runs;
  Case cap = Case::of(softcap(DType::f16, 64, "causal"), 300, 300, 2, 4, 1);
  cap.params = {{"softcap", 5}};  // tanh far from linear: the scale must enter before the modifier
  cap.scale = 0.5f;
  runs.push_back({cap, true});
  Case slope = Case::of(alibi(DType::bf16, 128), 257, 257, 1, 4, 2);
  slope.scale = 0.04f;
  runs.push_back({slope, true});
  run_all(runs);
}

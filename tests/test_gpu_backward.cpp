// The backward kernels on the GPU against the fp64 reference backward (the numerics rule of
// docs/architecture.md, per gradient): fresh random inputs and dO, NaN-poisoned gradients, odd
// lengths, every kind of mask, score modifiers (their derivative chained in), GQA/MQA, BHSD
// strides, non-default scale, rows with no visible key; and bitwise determinism.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <random>
#include <string>

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

// Head dims × five masks × odd lengths, fp16 and bf16 in turn. "kv >= q + 3" leaves the last rows of
// each head with no visible key: their dQ must be 0.
std::vector<Case> mask_matrix(const std::vector<std::pair<int, int>>& dims) {
  const char* masks[] = {"none", "causal", "causal_br", "window(100, 20)", "kv >= q + 3"};
  const std::pair<int64_t, int64_t> lengths[] = {{113, 203}, {1000, 1000}, {1023, 1023}, {203, 113}};
  std::vector<Case> cases;
  int i = 0;
  for (auto [dqk, dv] : dims)
    for (const char* mask : masks) {
      auto [sq, skv] = lengths[i % 4];
      const DType dt = i % 2 ? DType::f16 : DType::bf16;
      cases.push_back(Case::of(make_spec(dt, dqk, dv, mask), sq, skv, dqk >= 192 ? 1 : 2, 2, 2));
      ++i;
    }
  return cases;
}

// Beyond the mask matrix, at head dim d: softcap, ALiBi (a tensor the score reads), a document mask,
// GQA 8:1, MQA (at head dims `mqa`) and BHSD strides.
std::vector<Case> variants(int d, std::pair<int, int> mqa) {
  return {
      Case::of(make_spec(DType::bf16, d, d, "causal", "2 * tanh(score / 2)"), 1000, 1000, 1, 2, 2),
      Case::of(with_tensor(make_spec(DType::f16, d, d, "causal", "score - slope[h] * abs(q - kv)"), "slope",
                           ScalarType::f32, {"heads_q"}),
               1023, 1023, 1, 4, 4),
      Case::of(with_tensor(make_spec(DType::bf16, d, d, "causal && document(doc_id)"), "doc_id", ScalarType::i32,
                           {"batch", "seq_kv"}),
               1000, 1000, 2, 2, 2),
      Case::of(make_spec(DType::bf16, d, d, "causal"), 1000, 1000, 1, 8, 1),               // GQA 8:1
      Case::of(make_spec(DType::f16, mqa.first, mqa.second, "none"), 513, 1023, 2, 4, 1),  // MQA
      Case::of(make_spec(DType::bf16, d, d, "causal"), 300, 333, 2, 4, 2, /*bhsd=*/true),
  };
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
  run_all(mask_matrix({{16, 16}, {64, 64}, {72, 72}, {96, 96}, {128, 128}, {160, 160}, {192, 128}, {256, 256}}));
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

// Block maps built once (FlexAttention's BlockMask is built once per step and shared by every
// layer): the fused-dQ path reads the keys' map, the deterministic one both; each is judged by the
// fp64 reference and the reuse is bitwise stable.
TEST_CASE("gpu backward: block maps built once and reused pass the same checks", "[gpu][backward]") {
  REQUIRE_GPU_OR_SKIP();
  std::vector<Case> cases;
  Case doc = Case::of(with_tensor(make_spec(DType::bf16, 128, 128, "causal && document(doc_id)"), "doc_id",
                                  ScalarType::i32, {"batch", "seq_kv"}),
                      1000, 1000, 2, 2, 2);
  Case doc64 = Case::of(with_tensor(make_spec(DType::f16, 64, 64, "document(doc_id)"), "doc_id", ScalarType::i32,
                                    {"batch", "seq_kv"}),
                        777, 777, 1, 2, 1);
  for (Case* c : {&doc, &doc64}) {
    c->backward_map = true;
    cases.push_back(*c);
  }
  run_all(cases);
  run_all(cases, /*deterministic=*/true);
  Runtime rt = Runtime::create(0);
  test::BackwardResult r = run_backward_case(rt, doc, 9, /*repeats=*/9);
  INFO(r.message);
  CHECK(r.deterministic);
  CHECK(r.ok);
}

TEST_CASE("gpu backward: a block map is refused by a call it was not built for, naming why", "[gpu][backward]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  Case c = Case::of(with_tensor(make_spec(DType::bf16, 64, 64, "document(doc_id)"), "doc_id", ScalarType::i32,
                                {"batch", "seq_kv"}),
                    300, 300, 1, 2, 2);
  CompileOptions o;
  o.autotune = "off";
  Kernel kernel = rt.compile(c.spec, o);
  std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, 3);
  kernel.forward(dp->args);
  const size_t bytes = size_t(c.seq_q * c.heads_q * 64 * 2);
  DeviceBuffer d_o = rt.alloc(bytes), dq = rt.alloc(bytes), dk = rt.alloc(bytes), dv = rt.alloc(bytes);
  d_o.fill_bytes(0);
  BackwardArgs b;
  static_cast<ProblemShape&>(b) = c;
  b.q = dp->args.q, b.k = dp->args.k, b.v = dp->args.v, b.o = dp->args.o;
  b.d_o = bshd(d_o.data(), c.seq_q, c.heads_q, 64);
  b.dq = bshd(dq.data(), c.seq_q, c.heads_q, 64);
  b.dk = bshd(dk.data(), c.seq_kv, c.heads_kv, 64);
  b.dv = bshd(dv.data(), c.seq_kv, c.heads_kv, 64);
  b.lse = dp->args.lse;
  b.buffers = dp->args.buffers;
  BlockMap map = kernel.build_backward_block_map(b);
  BackwardArgs with = b;
  with.block_map = &map;
  CHECK_NOTHROW(kernel.backward(with));
  CHECK_THROWS_WITH(kernel.build_backward_block_map(with), Catch::Contains("args.block_map must be null"));
  BackwardArgs fewer_heads = with;  // the same tensors read as one head: other sizes, another map
  fewer_heads.heads_q = fewer_heads.heads_kv = 1;
  CHECK_THROWS_WITH(kernel.backward(fewer_heads), Catch::Contains("block_map was built for another kernel, sizes"));
  BlockMap forward_map = kernel.build_block_map(dp->args);
  BackwardArgs wrong = b;
  wrong.block_map = &forward_map;
  CHECK_THROWS_WITH(kernel.backward(wrong), Catch::Contains("build_block_map (the forward's)"));
  ForwardArgs f = dp->args;
  f.block_map = &map;
  CHECK_THROWS_WITH(kernel.forward(f), Catch::Contains("built by build_backward_block_map"));
  Kernel exact = rt.compile(make_spec(DType::bf16, 64, 64, "causal"), o);
  BackwardArgs e = b;
  e.buffers.clear();
  CHECK_THROWS_WITH(exact.build_backward_block_map(e), Catch::Contains("exact closed form"));
  e.block_map = &map;
  CHECK_THROWS_WITH(exact.backward(e), Catch::Contains("exact closed form and no block map"));
  rt.synchronize();
}

// dK and dV on the two warpgroups of one launch (FLASHJIT_BWD_WARPGROUPS, on by default; configs of
// 64 keys on 8 warps; docs/perf-notes.md §25), given explicitly: the matrix above reaches them
// through the heuristic only where it takes them (no score modifier).
TEST_CASE("gpu backward: dK and dV on two warpgroups of one key tile", "[gpu][backward][warpgroups]") {
  REQUIRE_GPU_OR_SKIP();
  const char* knob = std::getenv("FLASHJIT_BWD_WARPGROUPS");
  INFO("FLASHJIT_BWD_WARPGROUPS=" << (knob ? knob : "(unset)"));
  REQUIRE_FALSE((knob && std::string(knob) == "off"));
  std::vector<Case> cases = mask_matrix({{160, 160}, {192, 128}, {256, 256}});
  for (size_t i = 0; i < cases.size(); ++i) cases[i].backward_config = TileConfig{32, 64, 8, i % 3 ? 2 : 1};
  std::vector<Case> more = variants(256, {192, 128});
  for (Case& c : more) {
    c.backward_config = TileConfig{32, 64, 8, 2};
    cases.push_back(c);
  }
  run_all(cases);
  run_all({more[0], more[3]}, /*deterministic=*/true);
}

// d_qk = 64 with the dK/dV kernel's producer warpgroup, which also adds dQ there (64-query tiles on
// 8 warps; docs/perf-notes.md §32), given explicitly, and through the untuned choice for a long walk
// (4096 query rows per key tile without a mask: backward_heuristic_for).
TEST_CASE("gpu backward: d=64 with the producer warpgroup adding dQ", "[gpu][backward][producer]") {
  REQUIRE_GPU_OR_SKIP();
  const char* knob = std::getenv("FLASHJIT_BWD_PRODUCER");
  INFO("FLASHJIT_BWD_PRODUCER=" << (knob ? knob : "(unset)"));
  REQUIRE_FALSE((knob && std::string(knob) == "off"));
  std::vector<Case> cases = mask_matrix({{64, 64}, {64, 128}});
  for (size_t i = 0; i < cases.size(); ++i) cases[i].backward_config = TileConfig{64, 128, 8, i % 3 ? 2 : 1};
  std::vector<Case> more = variants(64, {64, 64});
  for (Case& c : more) {
    c.backward_config = TileConfig{64, 128, 8, 2};
    cases.push_back(c);
  }
  cases.push_back(Case::of(make_spec(DType::bf16, 64, 64, "none"), 4096, 4096, 1, 2, 2));
  // Untuned, 4096 query rows per key tile take that kernel and 2048 (causal) do not.
  Runtime rt = Runtime::create(0);
  CompileOptions off;
  off.autotune = "off";
  ProblemShape shape;
  shape.seq_q = shape.seq_kv = 4096;
  const std::string long_walk =
      rt.compile(make_spec(DType::bf16, 64, 64, "none"), off).backward_compiled(shape).description;
  CHECK_THAT(long_walk, Catch::Contains("dQ fused") && Catch::Contains(" producer"));
  const std::string causal =
      rt.compile(make_spec(DType::bf16, 64, 64, "causal"), off).backward_compiled(shape).description;
  CHECK_THAT(causal, !Catch::Contains("dQ fused"));
  // Deterministic calls keep the table's config: the long walk's gain is in adding dQ itself.
  const std::string det =
      rt.compile(make_spec(DType::bf16, 64, 64, "none"), off).backward_compiled(shape, true).description;
  CHECK_THAT(det, !Catch::Contains(" producer"));
  run_all(cases);
  run_all({more[0], more[3], cases.back()}, /*deterministic=*/true);
}

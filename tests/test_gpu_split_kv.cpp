// Split-KV decode (ForwardArgs::num_splits) on the GPU against the fp64 reference: decode query
// lengths × GQA groups × key lengths from 1 to 32768 × masks (none, bottom-right causal, a window,
// a document tensor mask) × splits {1, 2, 7, automatic}. Rows whose keys are all masked must
// still give O = 0 and LSE = −inf (the reference's rule), split or not. GQA groups of decode
// shapes run packed (Target::pack_gqa) wherever the spec allows it (not the document mask, which
// needs a block map), so these cases check the packed kernels too.
#include <catch2/catch.hpp>

#include <random>

#include "tests/gpu_case.hpp"
#include "tests/support.hpp"

using namespace flashjit;

using test::Case;
using test::make_spec;

namespace {

// The document mask seen from the bottom-right (decode): query row q is position q + seq_kv − seq_q
// of the sequence whose documents doc[b, ·] lists; rows before position 0 see nothing.
AttentionSpec decode_document(DType dt, int d) {
  AttentionSpec s = make_spec(dt, d, d, "causal_br && doc[b, max(q + seq_kv - seq_q, 0)] == doc[b, kv]");
  s.tensors = {{"doc", ScalarType::i32, {"batch", "seq_kv"}}};
  return s;
}

AttentionSpec mask_spec(int i, DType dt, int d) {
  switch (i) {
    case 0: return make_spec(dt, d, d, "none");
    case 1: return make_spec(dt, d, d, "causal_br");
    case 2: return make_spec(dt, d, d, "causal_br && kv >= q + seq_kv - seq_q - 300");  // a decode window
    default: return decode_document(dt, d);
  }
}

}  // namespace

TEST_CASE("gpu split-KV: decode shapes, GQA, masks and split counts", "[gpu][split]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  const int splits[] = {1, 2, 7, 0};
  int n = 0;
  for (int64_t seq_q : {1, 2, 4, 16})
    for (int64_t group : {1, 4, 8})
      for (int64_t seq_kv : {1, 17, 1000, 32768})
        for (int m = 0; m < 4; ++m) {
          // Every split count meets every shape over the loop: the index walks them in turn.
          const int s = splits[n++ % 4];
          const bool long_keys = seq_kv == 32768;  // one batch and KV head: the host reference is O(seq_kv)
          const DType dt = n % 2 ? DType::bf16 : DType::f16;
          Case c = Case::of(mask_spec(m, dt, n % 3 ? 128 : 64), seq_q, seq_kv, long_keys ? 1 : 2,
                            group * (long_keys ? 1 : 2), long_keys ? 1 : 2);
          c.num_splits = s;
          INFO(c.spec.canonical() << "sq=" << seq_q << " skv=" << seq_kv << " h=" << c.heads_q << "/" << c.heads_kv
                                  << " splits=" << s);
          const ref::Verdict v = test::run_case(rt, c, seed++);
          INFO(v.message);
          CHECK(v.ok);
        }
}

TEST_CASE("gpu split-KV: prefill shapes split by hand, GQA packing and where it cannot apply", "[gpu][split]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  // More splits than key tiles (empty splits), odd lengths, d_qk ≠ d_v, the mma.sync path, a score.
  std::vector<Case> cases;
  cases.push_back(Case::of(make_spec(DType::bf16, 128, 128, "causal"), 333, 333, 1, 2, 1));
  cases.back().num_splits = 5;
  cases.push_back(Case::of(make_spec(DType::f16, 64, 128, "none"), 77, 130, 2, 4, 2));
  cases.back().num_splits = 128;
  cases.push_back(Case::of(make_spec(DType::bf16, 96, 96, "causal_br"), 5, 4000, 1, 8, 1));
  cases.back().num_splits = 3;
  cases.back().mma = "sync";
  AttentionSpec cap = make_spec(DType::bf16, 128, 128, "causal_br", "softcap * tanh(score / softcap)");
  cap.params = {{"softcap", ScalarType::f32, 30}};
  cases.push_back(Case::of(cap, 3, 2049, 3, 4, 4));
  cases.back().num_splits = 0;
  cases.push_back(Case::of(make_spec(DType::bf16, 256, 256, "none"), 1, 5000, 2, 4, 1));
  cases.back().num_splits = 0;
  // A score reading the query head cannot be GQA-packed: decode runs unpacked, and still right.
  AttentionSpec alibi = make_spec(DType::f16, 64, 64, "causal_br", "score - slope[h] * abs(q - kv)");
  alibi.tensors = {{"slope", ScalarType::f32, {"heads_q"}}};
  cases.push_back(Case::of(alibi, 2, 3000, 2, 8, 1));
  // GQA packing across tiles: 16 rows × 8 heads are two 64-row tiles; d_qk ≠ d_v; mma.sync.
  cases.push_back(Case::of(make_spec(DType::bf16, 64, 128, "causal_br"), 16, 1500, 1, 16, 2));
  cases.push_back(Case::of(make_spec(DType::f16, 128, 128, "none"), 7, 900, 2, 12, 3));
  cases.back().mma = "sync";
  for (const Case& c : cases) {
    INFO(c.spec.canonical() << "sq=" << c.seq_q << " skv=" << c.seq_kv << " " << test::layout(c));
    const ref::Verdict v = test::run_case(rt, c, seed++);
    INFO(v.message);
    CHECK(v.ok);
  }
}

TEST_CASE("gpu split-KV: describe_launch says what forward launches: the decode row, the split, the packing",
          "[gpu][split]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  CompileOptions opts;
  opts.autotune = "off";
  // One query row of 4 query heads per K/V head, 8192 keys: the heuristic's decode row, packed
  // and split (grid x = the split count, one 64-row tile per K/V head).
  const Case c = Case::of(make_spec(DType::bf16, 128, 128, "causal_br"), 1, 8192, 1, 16, 4);
  Kernel kernel = rt.compile(c.spec, opts);
  std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, 1);
  const std::string text = kernel.describe_launch(dp->args);
  INFO(text);
  const bool wgmma = rt.device().arch() == "sm_90a";
  if (wgmma) {
    CHECK_THAT(text,
               Catch::Contains("config bm64_bn128_w4_s2 (decode heuristic for d=128, wgmma, at most 64 query rows"));
    CHECK(kernel.compiled().config.str() == "bm128_bn128_w8_s2");  // the base kernel stays the table's
  }
  CHECK_THAT(text, Catch::Contains("split-KV into") && Catch::Contains("(automatic)") &&
                       Catch::Contains("GQA packing 4") && Catch::Contains(" block 128 "));
  bool pdl = false;
  for (const KnobInfo& k : knobs()) pdl = pdl || (k.name == "FLASHJIT_PDL" && k.value == "auto");
  const bool early = pdl && rt.device().cc_major >= 9 && rt.device().driver_version >= 12030;
  CHECK(early == (text.find("combine launched early") != std::string::npos));
  // The forward it describes is right.
  kernel.forward(dp->args);
  rt.synchronize();
  std::vector<uint16_t> out(dp->o.size() / 2);
  std::vector<float> lse(dp->lse.size() / 4);
  dp->o.download(out.data(), dp->o.size());
  dp->lse.download(lse.data(), dp->lse.size());
  const ref::Verdict v = ref::verify(dp->p, out, &lse);
  INFO(v.message);
  CHECK(v.ok);
  // No output rows: nothing launched, and it says so.
  ForwardArgs empty = dp->args;
  empty.seq_q = 0;
  CHECK(kernel.describe_launch(empty) == "no launch: the call has no output rows");
}

// Issue 4's numerics matrix on the GPU: every DSL mask and score of the issue, odd shapes, all
// head dims, GQA and MQA, against the fp64 reference (docs/architecture.md, numerics).
#include <catch2/catch.hpp>
#include <random>

#include "tests/gpu_case.hpp"
#include "tests/support.hpp"

using namespace flashjit;
using test::Case;
using test::make_spec;

namespace {

// A mask or score variant: the spec parts it adds and the launch params it passes.
struct Variant {
  const char* label;
  std::string mask, score = "score";
  std::vector<ParamDecl> params;
  std::vector<TensorDecl> tensors;
  std::vector<ParamValue> values;
};

std::vector<Variant> variants() {
  return {
      {"none", "none"},
      {"causal", "causal"},
      {"causal_br", "causal_br"},
      {"window", "window(256, 0)"},
      {"prefix", "prefix(100)"},
      {"prefix_lm", "prefix(n) || causal", "score", {{"n", ScalarType::i32, 100}}, {}, {{"n", 77}}},
      {"document", "document(doc)", "score", {}, {{"doc", ScalarType::i32, {"seq_kv"}}}},
      {"softcap", "none", "softcap * tanh(score / softcap)", {{"softcap", ScalarType::f32, 30}}, {}, {{"softcap", 30}}},
      {"alibi", "causal", "score - slope[h] * abs(q - kv)", {}, {{"slope", ScalarType::f32, {"heads_q"}}}},
  };
}

Case make_case(const Variant& v, DType dt, int d, int dv, int64_t sq, int64_t skv) {
  Case c;
  c.spec = make_spec(dt, d, dv, v.mask, v.score);
  c.spec.params = v.params;
  c.spec.tensors = v.tensors;
  c.params = v.values;
  c.seq_q = sq;
  c.seq_kv = skv;
  c.batch = sq * skv >= (1 << 22) ? 1 : 2;
  return c;
}

void check_all(const std::vector<Case>& cases) {
  Runtime rt = Runtime::create(0);
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  for (const Case& c : cases) {
    ref::Verdict v = test::run_case(rt, c, seed++);
    INFO(c.spec.canonical() << "sq=" << c.seq_q << " skv=" << c.seq_kv << " h=" << c.heads_q << "/" << c.heads_kv << ": "
                            << v.message);
    CHECK(v.ok);
  }
}

}  // namespace

TEST_CASE("gpu masks: every mask and score at d=128 on odd shapes in fp16 and bf16", "[gpu][masks]") {
  REQUIRE_GPU_OR_SKIP();
  std::vector<Case> cases;
  const std::pair<int64_t, int64_t> shapes[] = {{113, 203}, {1023, 1024}, {4096, 4096}, {1, 4096}};
  for (const Variant& v : variants())
    for (DType dt : {DType::f16, DType::bf16})
      for (auto [sq, skv] : shapes) cases.push_back(make_case(v, dt, 128, 128, sq, skv));
  check_all(cases);
}

TEST_CASE("gpu masks: every head dim with masks that cut tiles", "[gpu][masks]") {
  REQUIRE_GPU_OR_SKIP();
  std::vector<Case> cases;
  const auto vs = variants();
  const std::pair<int, int> dims[] = {{64, 64}, {72, 72}, {80, 80}, {96, 96}, {128, 128}, {160, 160}, {192, 192}, {256, 256}, {192, 128}};
  int i = 0;
  for (auto [d, dv] : dims)
    for (DType dt : {DType::f16, DType::bf16}) {
      cases.push_back(make_case(vs[2 + (i++ % (vs.size() - 2))], dt, d, dv, 113, 203));  // rotates through the masks
      cases.push_back(make_case(vs[1], dt, d, dv, 1023, 1024));
    }
  check_all(cases);
}

// Persistent CTAs (CompiledKernel::persistent): with more tiles than SMs each CTA walks several,
// its pipeline's stages and mbarrier phases running on from one tile to the next, and loads the
// next tile's Q while it stores this one's O. Among them: partial last tiles, block-map walks,
// a tensor indexed by head, and (causal_br, fewer keys than queries) tiles with no key at all.
TEST_CASE("gpu masks: persistent CTAs walking more tiles than SMs, every mask, d=128 and d=256", "[gpu][masks]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  std::vector<Case> cases;
  for (int d : {128, 256})
    for (const Variant& v : variants()) {
      const std::string label = v.label;
      if (d == 256 && label != "none" && label != "causal" && label != "document" && label != "softcap") continue;
      Case c = make_case(v, DType::bf16, d, d, 200, 333);
      c.heads_q = c.heads_kv = 48;
      c.batch = 3;  // 2 × 48 × 3 = 288 query tiles
      cases.push_back(c);
    }
  Case empty_tiles = make_case(variants()[2], DType::f16, 128, 128, 400, 150);  // rows 0–249 see no key
  empty_tiles.heads_q = empty_tiles.heads_kv = 48;  // (a GQA group this short would be packed: no producer)
  empty_tiles.batch = 1;
  cases.push_back(empty_tiles);
  bool knob_auto = false;
  for (const KnobInfo& k : knobs()) knob_auto = knob_auto || (k.name == "FLASHJIT_PERSISTENT" && k.value == "auto");
  for (const Case& c : cases) {
    CompileOptions opts;
    opts.autotune = "off";
    Kernel kernel = rt.compile(c.spec, opts);
    std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, 1);
    const std::string text = kernel.describe_launch(dp->args);
    INFO(text);
    const bool wgmma = kernel.compiled().description.find("/wgmma ") != std::string::npos;
    if (wgmma && c.spec.head_dim_qk == 128) CHECK(kernel.compiled().persistent);  // the producer plan's
    CHECK((kernel.compiled().persistent && knob_auto) == (text.find("(persistent, ") != std::string::npos));
  }
  check_all(cases);
}

// ordered_tile (templates/fwd/tile_order.hpp): causal launches take their query tiles longest
// first across groups of the heads whose K/V fit 16 MiB, on the CTA-wide grid (one batch's heads)
// and in the persistent walk (heads × batches); the window and document shapes keep the head-by-
// head order, checked at the same sizes. Each causal shape leaves a last group smaller than the
// others: d = 64 at 1000 keys groups 65 heads (72 = 65 + 7), d = 128 at 700 keys 46 (24 × 2 =
// 46 + 2), GQA 4:1 at d = 128 and 384 keys 341 query heads (44 × 8 = 341 + 11).
TEST_CASE("gpu masks: query tiles longest first across head groups of uneven size", "[gpu][masks]") {
  REQUIRE_GPU_OR_SKIP();
  const std::vector<Variant> v = variants();
  std::vector<Case> cases;
  auto add = [&](const Variant& var, DType dt, int d, int64_t seq, int64_t heads_q, int64_t heads_kv, int64_t batch) {
    Case c = make_case(var, dt, d, d, seq, seq);
    c.heads_q = heads_q, c.heads_kv = heads_kv, c.batch = batch;
    cases.push_back(c);
  };
  add(v[1], DType::bf16, 64, 1000, 72, 72, 1);  // causal: 128 × 96 tiles, two CTAs per SM
  add(v[3], DType::f16, 64, 1000, 72, 72, 1);   // window(256, 0): 64 × 64 tiles
  add(v[6], DType::bf16, 64, 1000, 72, 72, 1);  // document: a block map, 64 × 128 tiles
  add(v[1], DType::bf16, 128, 700, 24, 24, 2);  // causal: the persistent producer walk
  add(v[8], DType::f16, 128, 384, 44, 11, 8);   // ALiBi on causal, GQA 4:1 (whole tiles: not packed)
  check_all(cases);
}

// ForwardPlan::wg_key_ranges: on 128-row tiles each warpgroup computes only the key tiles its own
// 64 rows see. Last tiles of 104 rows (1000 keys: the second warpgroup has 40) and of 64 (960: it
// has none), a two-sided window whose warpgroups start and end in different tiles, bottom-right
// causal with more keys than queries, a prefix, a score modifier, on both tile widths that take it.
TEST_CASE("gpu masks: two warpgroups of one query tile walk their own key ranges", "[gpu][masks]") {
  REQUIRE_GPU_OR_SKIP();
  const std::vector<Variant> v = variants();
  const Variant two_sided{"window(64, 64)", "window(64, 64)"};
  std::vector<Case> cases;
  for (TileConfig config : {TileConfig{128, 96, 8, 2}, TileConfig{128, 64, 8, 2}}) {
    auto add = [&](const Variant& var, DType dt, int64_t sq, int64_t skv) {
      cases.push_back(make_case(var, dt, 64, 64, sq, skv));
      cases.back().config = config;
    };
    add(v[1], DType::bf16, 1000, 1000);  // causal
    add(v[1], DType::f16, 960, 960);
    add(v[2], DType::bf16, 700, 1500);   // causal_br
    add(v[3], DType::bf16, 1000, 1000);  // window(256, 0)
    add(two_sided, DType::f16, 777, 777);
    add(v[4], DType::bf16, 333, 1111);  // prefix(100)
    add(v[8], DType::f16, 1000, 1000);  // ALiBi on causal
  }
  Runtime rt = Runtime::create(0);
  CompileOptions opts;
  opts.config = cases.front().config;
  CHECK_THAT(rt.compile(cases.front().spec, opts).compiled().description, Catch::Contains("+wg-key-ranges"));
  check_all(cases);
}

TEST_CASE("gpu masks: GQA 8:1 and MQA with masks and scores", "[gpu][masks]") {
  REQUIRE_GPU_OR_SKIP();
  std::vector<Case> cases;
  for (const Variant& v : variants())
    for (int64_t kv_heads : {1, 2}) {  // 8 query heads: MQA and GQA 4:1 … and 8:1 below
      Case c = make_case(v, DType::bf16, 128, 128, 257, 300);
      c.heads_q = 8;
      c.heads_kv = kv_heads;
      cases.push_back(c);
    }
  Case g = make_case(variants()[3], DType::f16, 64, 64, 1023, 1024);
  g.heads_q = 16;
  g.heads_kv = 2;  // 8:1
  cases.push_back(g);
  check_all(cases);
}

TEST_CASE("gpu masks: a reused block map gives the reference's output, as one built per call does", "[gpu][masks]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  Case c = make_case(variants()[6], DType::bf16, 64, 64, 777, 999);  // document(doc): a block-map kernel
  c.batch = 2;
  Kernel kernel = rt.compile(c.spec);
  REQUIRE(!kernel.compiled().map_entry.empty());
  std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, 5);
  const ForwardArgs& a = dp->args;
  // Each launch writes a NaN-poisoned output and LSE and is judged by the fp64 reference.
  auto run = [&](const ForwardArgs& args, const char* what) {
    dp->o.fill_bytes(0xFF);
    dp->lse.fill_bytes(0xFF);
    kernel.forward(args);
    rt.synchronize();
    std::vector<uint16_t> out(size_t(c.batch * c.seq_q * c.heads_q * 64));
    std::vector<float> lse(size_t(c.batch * c.heads_q * c.seq_q));
    dp->o.download(out.data(), out.size() * 2);
    dp->lse.download(lse.data(), lse.size() * 4);
    const ref::Verdict v = ref::verify(dp->p, out, &lse);
    INFO(what << ": " << v.message);
    CHECK(v.ok);
    return out;
  };
  const std::vector<uint16_t> per_call = run(a, "map built per call");
  BlockMap map = kernel.build_block_map(a);
  ForwardArgs b = a;
  b.block_map = &map;
  CHECK(run(b, "reused map, first launch") == per_call);
  CHECK(run(b, "reused map, second launch") == per_call);
  ForwardArgs other = b;
  other.seq_q = 700;
  CHECK_THROWS_WITH(kernel.forward(other), Catch::Contains("block_map was built for another kernel, sizes or params"));
  // A split launch runs the bucket's split form; the map is built for the module it launches.
  ForwardArgs split = a;
  split.num_splits = 3;
  const std::vector<uint16_t> split_per_call = run(split, "split into 3, map built per call");
  BlockMap split_map = kernel.build_block_map(split);
  split.block_map = &split_map;
  CHECK(run(split, "split into 3, reused map") == split_per_call);
  Kernel exact = rt.compile(make_spec(DType::bf16, 64, 64, "causal"));
  CHECK(exact.compiled().map_entry.empty());
  ForwardArgs e = a;
  e.buffers.clear();
  CHECK_THROWS_WITH(exact.build_block_map(e), Catch::Contains("exact closed form"));
}

// A tiered compile (runtime/upgrade.hpp) serves a kernel's quick form (no rotated walk) until the
// full kernel has loaded, so the two must give the same output and LSE bit for bit: on every mask
// and score at d = 128, on walks of 1024 keys and of 333 (then 288 query tiles, so each CTA walks
// two or three). Each quick form is also checked against the fp64 reference.
TEST_CASE("gpu masks: a tiered compile's quick form matches the reference and the full kernel bit for bit",
          "[gpu][masks][tiered]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  const bool hopper = rt.device().arch() == "sm_90a";  // the rotated walk is the wgmma producer kernel's
  uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  int i = 0;
  for (const Variant& v : variants())
    for (bool short_walk : {false, true}) {
      Case c =
          make_case(v, i++ % 2 ? DType::f16 : DType::bf16, 128, 128, short_walk ? 200 : 1023, short_walk ? 333 : 1024);
      // 256 or 288 query tiles, more than SMs: the base kernel serves, not a split-KV form
      c.heads_q = c.heads_kv = short_walk ? 48 : 16;
      c.batch = short_walk ? 3 : 2;
      c.tiered = "quick";
      const ref::Verdict verdict = test::run_case(rt, c, seed);
      INFO(c.spec.canonical() << "sq=" << c.seq_q << " skv=" << c.seq_kv << ": " << verdict.message);
      CHECK(verdict.ok);
      CompileOptions opts;
      opts.autotune = "off";
      opts.tiered = "quick";
      const Kernel quick = rt.compile(c.spec, opts);
      opts.tiered = "off";
      const Kernel full = rt.compile(c.spec, opts);
      if (hopper) {
        CHECK_THAT(quick.compiled().description, Catch::Contains("+quick") && !Catch::Contains("+rotated"));
        CHECK_THAT(full.compiled().description, Catch::Contains("+rotated") && !Catch::Contains("+quick"));
      } else {
        CHECK(quick.compiled().key == full.compiled().key);
      }
      std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, seed++);
      auto run = [&](const Kernel& k) {
        CHECK_THAT(k.describe_launch(dp->args), Catch::Contains(k.compiled().key));  // the base config's kernel
        dp->o.fill_bytes(0xFF);
        dp->lse.fill_bytes(0xFF);
        k.forward(dp->args);
        rt.synchronize();
        std::string bytes(dp->o.size() + dp->lse.size(), '\0');
        dp->o.download(bytes.data(), dp->o.size());
        dp->lse.download(bytes.data() + dp->o.size(), dp->lse.size());
        return bytes;
      };
      CHECK(run(quick) == run(full));
    }
}

// FLASHJIT_TIERED=on: with no cache entry Runtime::compile returns while the full kernel compiles;
// Kernel::wait_full waits for it, and launches and compiled() then take it. The compile cache
// keeps it, so the next compile of the spec loads it at once; a kernel dropped mid-compile waits
// for it in its destructor. d = 256 has no quick form.
TEST_CASE("gpu masks: a tiered compile swaps in the full kernel, which the compile cache keeps",
          "[gpu][masks][tiered]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  if (rt.device().arch() != "sm_90a") SKIP_TEST("quick forms are the wgmma producer kernel's (sm_90a)");
  test::ScopedCacheDir cache;
  const test::TempDir& dir = cache.dir;
  CompileOptions opts;
  opts.autotune = "off";
  opts.tiered = "on";
  Case c = make_case(variants()[3], DType::bf16, 128, 128, 1000, 1000);  // window(256, 0)
  c.heads_q = c.heads_kv = 16;  // 256 query tiles: no split-KV form (its module would be a third entry)
  const Kernel k = rt.compile(c.spec, opts);
  std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, 3);
  auto run = [&] {
    dp->o.fill_bytes(0xFF);
    k.forward(dp->args);  // the quick form or the full kernel, whichever has loaded
    rt.synchronize();
    std::vector<uint16_t> out(dp->o.size() / 2);
    dp->o.download(out.data(), dp->o.size());
    return out;
  };
  const std::vector<uint16_t> early = run();
  k.wait_full();
  CHECK_THAT(k.compiled().description, Catch::Contains("+rotated") && !Catch::Contains("+quick"));
  CHECK_THAT(k.describe_launch(dp->args), Catch::Contains(k.compiled().key));
  const std::vector<uint16_t> late = run();
  CHECK(late == early);
  CHECK(ref::verify(dp->p, late, nullptr).ok);
  CHECK(test::kernel_files(dir.path) == 2);  // the quick form and the full kernel
  const Kernel again = rt.compile(c.spec, opts);
  CHECK(again.compiled().key == k.compiled().key);
  CHECK(again.compiled().stages.empty());  // a compile-cache hit: LLVM did not run
  AttentionSpec other = c.spec;
  other.mask = "window(300, 0)";
  { const Kernel dropped = rt.compile(other, opts); }
  const Kernel later = rt.compile(other, opts);
  CHECK_THAT(later.compiled().description, Catch::Contains("+rotated"));
  CHECK(later.compiled().stages.empty());
  CHECK(test::kernel_files(dir.path) == 4);
  const Kernel d256 = rt.compile(make_spec(DType::bf16, 256, 256, "causal"), opts);
  CHECK_THAT(d256.compiled().description, !Catch::Contains("+quick"));
  CHECK(test::kernel_files(dir.path) == 5);
}

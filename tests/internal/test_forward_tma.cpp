// The forward's TMA loads (ForwardPlan::tma, FLASHJIT_TMA): which plans get them, the kernel's
// tensor-map parameters, and that the loads, not cp.async, fill the stages.
#include <catch2/catch.hpp>
#include <regex>

#include "compiler/pipeline.hpp"
#include "runtime/tensor_map.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/fwd/plan.hpp"
#include "tests/codegen_matrix.hpp"
#include "tests/support.hpp"

using namespace flashjit;

namespace {

CompiledKernel compile(const AttentionSpec& spec, TileConfig config, bool tma) {
  KernelRequest request;
  request.template_name = "attention_fwd";
  request.target = Target{"sm_90a"};
  request.target.tma = tma;
  request.config = config;
  return compile_planned(plan_kernel(analyze_spec(spec), request), StageOptions{});
}
CompiledKernel compile(int d, const std::string& mask, TileConfig config, bool tma) {
  return compile(test::make(DType::bf16, d, mask), config, tma);
}

// Whether the entry's code reads parameter `i` by value (ld.param): the tensor maps are only ever
// addressed, for the TMA unit.
bool loads_param(const CompiledKernel& k, int i) {
  return k.ptx.find("[" + k.entry + "_param_" + std::to_string(i) + "]") != std::string::npos;
}

// The indices of the entry's tensor-map parameters: 128 bytes by value, 64-byte aligned (the
// CUtensorMap layout).
std::vector<int> map_params(const CompiledKernel& k) {
  const std::regex map_param(".param .align 64 .b8 " + k.entry + "_param_([0-9]+)\\[128\\]");
  std::vector<int> at;
  for (auto it = std::sregex_iterator(k.ptx.begin(), k.ptx.end(), map_param); it != std::sregex_iterator(); ++it)
    at.push_back(std::stoi((*it)[1]));
  return at;
}

// The byte counts the issuing thread expects on its mbarriers (mbarrier.arrive.expect_tx), in order.
std::vector<long> expected_bytes(const std::string& ptx) {
  std::vector<long> out;
  const std::regex arrive(R"(expect_tx\.shared::cta\.b64 st, \[%r\d+\], (%r\d+);)");
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), arrive); it != std::sregex_iterator(); ++it) {
    std::smatch set;
    const std::string reg = (*it)[1];
    const std::regex mov("mov\\.b32 \t" + reg + ", ([0-9]+);");
    out.push_back(std::regex_search(ptx, set, mov) ? std::stol(set[1]) : -1);
  }
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("forward tma: producer plans load by tensor map unless FLASHJIT_TMA is off", "[pipeline]") {
  Target on{"sm_90a"}, off{"sm_90a"};
  off.tma = false;
  auto plan = [](int d, const Target& t, TileConfig c) {
    return plan_forward(analyze_spec(test::make(DType::bf16, d, "causal")), c, t);
  };
  const ForwardPlan p = plan(128, on, {128, 128, 8, 2});
  REQUIRE(p.producer);
  CHECK(p.tma);
  CHECK_THAT(p.describe(), Catch::Contains("+staged-store +tma"));
  CHECK(plan(256, on, {128, 64, 8, 2}).tma);
  CHECK(plan(64, on, {128, 128, 8, 4}).tma);
  // d = 256 on 128-key tiles in one stage: O goes through the V stage, which holds it exactly, and
  // the producer loads Q into the one Q buffer; with cp.async loads, or two stages, O stays in Q.
  const ForwardPlan wide = plan(256, on, {128, 128, 8, 1});
  REQUIRE(wide.producer);
  CHECK(wide.q_buffers == 1);
  CHECK(wide.kv_bars);
  CHECK(wide.stage_in_v);
  CHECK_FALSE(wide.stage_in_q);
  CHECK(wide.smem.o_stage == wide.smem.v);
  CHECK(wide.smem.v_stage == 128 * 256 * 2);
  CHECK_THAT(wide.describe(), Catch::Contains("+persistent(q-ahead)") && Catch::Contains("+staged-store(v)"));
  CHECK(wide.pingpong);
  CHECK_THAT(wide.describe(), Catch::Contains("+pingpong"));
  const ForwardPlan wide_off = plan(256, off, {128, 128, 8, 1});
  CHECK_FALSE(wide_off.stage_in_v);
  CHECK_FALSE(wide_off.pingpong);
  CHECK(wide_off.stage_in_q);
  CHECK_THAT(wide_off.describe(), !Catch::Contains("q-ahead"));
  CHECK_FALSE(plan(256, on, {128, 64, 8, 2}).stage_in_v);
  CHECK(plan(256, on, {128, 64, 8, 2}).stage_in_q);
  CHECK_FALSE(plan(256, on, {128, 64, 8, 2}).pingpong);
  CHECK(p.pingpong);  // d = 128: the rotated walk's warpgroups take turns too
  // The same shared memory either way: TMA writes the panels cp.async wrote.
  const ForwardPlan q = plan(128, off, {128, 128, 8, 2});
  CHECK(q.producer);
  CHECK_FALSE(q.tma);
  CHECK_THAT(q.describe(), !Catch::Contains("+tma"));
  CHECK(q.shared_bytes == p.shared_bytes);
  // Without a producer warpgroup the CTA's first thread issues them, and every warp waits on the
  // stage's mbarriers: two per stage and Q's, after the K/V stages.
  const ForwardPlan cta = plan(64, on, {64, 128, 4, 2});
  CHECK_FALSE(cta.producer);
  CHECK(cta.tma);
  CHECK_THAT(cta.describe(), Catch::Contains("+tma"));
  CHECK(cta.smem.barriers == 64 * 64 * 2 + 2 * 2 * 128 * 64 * 2);
  CHECK(cta.shared_bytes == cta.smem.barriers + 2 * 2 * 8 + 8 + 1024);
  CHECK(cta.min_ctas_per_sm == 3);  // still three CTAs per SM, as with cp.async
  CHECK(plan(128, on, {64, 128, 4, 2}).tma);
  CHECK(plan(192, on, {128, 64, 8, 2}).tma);
  const ForwardPlan cta_off = plan(64, off, {64, 128, 4, 2});
  CHECK_FALSE(cta_off.tma);
  CHECK(cta_off.smem.barriers == 0);
  CHECK(cta_off.shared_bytes == cta.shared_bytes - 2 * 2 * 8 - 8);
  // Forms the tensor maps do not describe keep cp.async: a partly filled 64-column panel, the
  // split, varlen, paged and GQA-packed walks, and mma.sync.
  CHECK_FALSE(plan(96, on, {64, 128, 4, 2}).tma);
  for (int form = 0; form < 4; ++form) {
    Target t = on;
    if (form == 0) t.split_kv = true;
    if (form == 1) t.varlen = true;
    if (form == 2) t.paged = true;
    if (form == 3) t.pack_gqa = 2;
    CHECK_FALSE(plan(64, t, {64, 128, 4, 2}).tma);
  }
  Target sm80{"sm_80"};
  CHECK_FALSE(plan(128, sm80, {128, 64, 4, 2}).tma);
}

TEST_CASE("forward tma: two warpgroups of a closed-form mask walk their own key ranges", "[pipeline]") {
  Target on{"sm_90a"}, off{"sm_90a"};
  off.tma = false;
  auto plan = [](const std::string& mask, const Target& t, TileConfig c) {
    return plan_forward(analyze_spec(test::make(DType::bf16, 64, mask)), c, t);
  };
  for (const char* mask : {"causal", "window(1023, 0) && causal", "window(64, 64)", "causal_br", "prefix(100)"})
    for (TileConfig c : {TileConfig{128, 96, 8, 2}, TileConfig{128, 64, 8, 2}}) {
      const ForwardPlan p = plan(mask, on, c);
      INFO(mask << " " << c.str() << ": " << p.describe());
      CHECK(p.wg_key_ranges);
      CHECK_THAT(p.describe(), Catch::Contains("+wg-key-ranges"));
    }
  CHECK_FALSE(plan("causal", on, {64, 64, 4, 2}).wg_key_ranges);        // one warpgroup
  CHECK_FALSE(plan("causal", on, {128, 64, 4, 2}).wg_key_ranges);       // one warpgroup, two m-tiles per warp
  CHECK_FALSE(plan("", on, {128, 96, 8, 2}).wg_key_ranges);             // every row walks every key
  CHECK_FALSE(plan("kv % 3 == 0", on, {128, 64, 8, 2}).wg_key_ranges);  // a block map's list is per CTA
  CHECK_FALSE(plan("causal", off, {128, 64, 8, 2}).wg_key_ranges);      // the cp.async walk's CTA barriers
  CHECK_FALSE(plan_forward(analyze_spec(test::make(DType::bf16, 128, "causal")), {128, 128, 8, 2}, on).wg_key_ranges);
  Target split = on;
  split.split_kv = true;
  CHECK_FALSE(plan("causal", split, {128, 64, 8, 2}).wg_key_ranges);
}

// The skip's branch must reach ptxas as warp-uniform: a plain branch on a tid-derived value makes it
// assemble the walk's body as divergent code, 3–4.5% slower on the H100 (docs/perf-notes.md §63).
TEST_CASE("forward tma: a warpgroup's key-range branch is a vote, its index a lane-0 broadcast", "[codegen]") {
  const CompiledKernel two = compile(64, "causal", {128, 96, 8, 2}, true);
  INFO(two.description);
  CHECK(count(two.ptx, "vote.sync.all.pred") == 1);  // once per walk step, in the one walk
  CHECK(count(two.ptx, "shfl.sync.idx.b32") == 1);
  const CompiledKernel one = compile(64, "causal", {64, 64, 4, 2}, true);
  CHECK(count(one.ptx, "vote.sync.all.pred") == 0);
}

TEST_CASE("forward tma: the CTA-wide walk's first thread loads, every warp waits on mbarriers", "[codegen]") {
  const CompiledKernel k = compile(64, "causal", {64, 128, 4, 2}, true);
  INFO(k.description);
  // Q's, K's and V's maps, then O's (d_v = 64: O goes out by TMA store).
  CHECK(k.tensor_maps == kMapCount + 1);
  CHECK_THAT(k.description, Catch::Contains("+staged-store(q) +tma-store"));
  // Q (one panel), two stages of K and V before the walk and one refill in it, one instruction
  // per 64-column panel; each load's bytes expected on its mbarrier by the issuing thread: Q's
  // 64 × 64 × 2, then each stage's K and V, 2 × 128 × 64 × 2.
  CHECK(count(k.ptx, "cp.async.bulk.tensor.4d.shared::cluster.global") == 7);
  CHECK(expected_bytes(k.ptx) == std::vector<long>{8192, 32768, 32768, 32768});
  // Two mbarriers per stage and Q's.
  CHECK(count(k.ptx, "mbarrier.init.shared") == 5);
  // No cp.async, and two CTA barriers: after the mbarriers' initialisation, and once every warp is
  // past its last product (the Q buffer then holds O); none per key tile.
  CHECK_THAT(k.ptx, !Catch::Contains("cp.async.cg"));
  CHECK(count(k.ptx, "bar.sync") == 2);
  CHECK(count(k.ptx, "mbarrier.try_wait.parity") == 3);  // Q, the stage, the refill's empty stage
  // The epilogue: each warp's rows by stmatrix into the Q buffer, published to the async proxy
  // (the second fence), then one TMA store of the warp's one 64-column panel, committed and read
  // out before the CTA exits.
  CHECK(count(k.ptx, "stmatrix.sync.aligned") > 0);
  CHECK(count(k.ptx, "fence.proxy.async") == 2);
  CHECK(count(k.ptx, "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group") == 1);
  CHECK(count(k.ptx, "cp.async.bulk.commit_group") == 1);
  CHECK(count(k.ptx, "cp.async.bulk.wait_group.read 0") == 1);
  CHECK(map_params(k).size() == kMapCount + 1);

  // d_v = 128 on the CTA-wide walk keeps its 4-byte stores and three maps (the TMA store was
  // measured at d = 64 only).
  const CompiledKernel wide = compile(128, "causal", {64, 128, 4, 2}, true);
  INFO(wide.description);
  CHECK_THAT(wide.description, !Catch::Contains("+producer") && !Catch::Contains("staged-store"));
  CHECK(wide.tensor_maps == kMapCount);
  CHECK_THAT(wide.ptx, !Catch::Contains("cp.async.bulk.tensor.4d.global.shared::cta"));

  // FLASHJIT_TMA=off: every thread copies with cp.async, two CTA barriers per key tile.
  const CompiledKernel off = compile(64, "causal", {64, 128, 4, 2}, false);
  CHECK_FALSE(off.tensor_maps);
  CHECK_THAT(off.ptx, Catch::Contains("cp.async.cg"));
  CHECK_THAT(off.ptx, !Catch::Contains("mbarrier"));
  CHECK(count(off.ptx, "bar.sync") == 3);
}

TEST_CASE("forward tma: the kernel takes three 128-byte tensor maps and loads every panel with them", "[codegen]") {
  const CompiledKernel k = compile(128, "causal", {128, 128, 8, 2}, true);
  INFO(k.description);
  CHECK(k.tensor_maps == kMapCount);
  // The last three parameters.
  const std::vector<int> at = map_params(k);
  REQUIRE(at.size() == kMapCount);
  CHECK(at[1] == at[0] + 1);
  CHECK(at[2] == at[0] + 2);
  CHECK_THAT(k.ptx, Catch::Contains("cvta.param.u64"));
  for (int i : at) CHECK_FALSE(loads_param(k, i));
  // Q, K and V, two 64-column panels each, one instruction per panel; each load's bytes expected
  // on its mbarrier by the issuing thread.
  CHECK(count(k.ptx, "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes") == 6);
  CHECK(count(k.ptx, "mbarrier.arrive.expect_tx.shared::cta.b64") == 3);
  // Each expects its whole tile, 128 rows × 128 columns × 2 bytes: a wrong count never completes
  // the phase, and the CTA waits forever.
  CHECK(expected_bytes(k.ptx) == std::vector<long>{32768, 32768, 32768});
  // No thread copies with cp.async, and the compute warps fence the async proxy only once, after
  // the mbarriers' initialisation: the TMA writes through the proxy wgmma reads.
  CHECK_THAT(k.ptx, !Catch::Contains("cp.async.cg"));
  CHECK_THAT(k.ptx, !Catch::Contains("cp.async.mbarrier.arrive"));
  CHECK(count(k.ptx, "fence.proxy.async") == 1);

  // FLASHJIT_TMA=off: the same plan's producer copies with cp.async, no tensor maps.
  const CompiledKernel off = compile(128, "causal", {128, 128, 8, 2}, false);
  CHECK_FALSE(off.tensor_maps);
  CHECK(off.key != k.key);
  CHECK_THAT(off.ptx, !Catch::Contains("cp.async.bulk.tensor"));
  CHECK_THAT(off.ptx, !Catch::Contains(".align 64 .b8"));
  CHECK_THAT(off.ptx, Catch::Contains("cp.async.cg"));
  CHECK(count(off.ptx, "fence.proxy.async") > 1);

  // A mask with a block map: its tile lists and counts come just before the tensor maps, and the
  // kernel reads those, never the maps.
  AttentionSpec doc = test::make(DType::bf16, 128, "document(doc)");
  doc.tensors = {{"doc", ScalarType::i32, {"seq_kv"}}};
  const CompiledKernel listed = compile(doc, {128, 128, 8, 2}, true);
  INFO(listed.description);
  REQUIRE(listed.tensor_maps);
  REQUIRE_FALSE(listed.map_entry.empty());
  const int maps_at = at[0] + 1 + 2;  // one spec tensor, then the tile lists and counts
  CHECK_THAT(listed.ptx,
             Catch::Contains(".param .align 64 .b8 " + listed.entry + "_param_" + std::to_string(maps_at) + "[128]"));
  CHECK(loads_param(listed, maps_at - 2));
  CHECK(loads_param(listed, maps_at - 1));
  for (int i = maps_at; i < maps_at + kMapCount; ++i) CHECK_FALSE(loads_param(listed, i));

  // d = 256 (one Q buffer): K and V by tensor map (four panels each, one mbarrier per stage), Q by
  // the compute warps' cp.async, which they publish to the async proxy themselves.
  const CompiledKernel wide = compile(256, "none", {128, 64, 8, 2}, true);
  INFO(wide.description);
  CHECK(wide.tensor_maps);
  CHECK(count(wide.ptx, "cp.async.bulk.tensor.4d") == 8);
  CHECK(count(wide.ptx, "mbarrier.arrive.expect_tx") == 1);
  CHECK(expected_bytes(wide.ptx) == std::vector<long>{2 * 64 * 256 * 2});  // K and V on one mbarrier
  CHECK_THAT(wide.ptx, Catch::Contains("cp.async.cg"));
  CHECK(count(wide.ptx, "fence.proxy.async") == 2);
}

TEST_CASE("forward tma: d = 256 on one stage loads Q by the producer and stages O in the V stage", "[codegen]") {
  const CompiledKernel k = compile(256, "none", {128, 128, 8, 1}, true);
  INFO(k.description);
  CHECK(k.tensor_maps == kMapCount);
  // Q, K and V by tensor map, four 64-column panels each, each tile's 64 KB expected on its own
  // mbarrier; no thread copies with cp.async (the compute warps no longer load Q).
  CHECK(count(k.ptx, "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes") == 12);
  CHECK(expected_bytes(k.ptx) == std::vector<long>{65536, 65536, 65536});
  CHECK_THAT(k.ptx, !Catch::Contains("cp.async.cg"));
  CHECK_THAT(k.ptx, !Catch::Contains("cp.async.mbarrier.arrive"));
  // The epilogue: each warp's 16 rows of 256 columns by 16 stmatrix.x4 and 16 16-byte stores, and
  // a proxy fence before the stage is freed for the TMA's refill (the other fence follows the
  // mbarriers' initialisation).
  CHECK(count(k.ptx, "stmatrix.sync.aligned.m8n8.x4.shared.b16") == 16);
  CHECK(count(k.ptx, "st.global.v4") == 16);
  CHECK(count(k.ptx, "fence.proxy.async") == 2);
  // Mbarriers: the stage's K and V full/empty pairs, then the walk's eight (tile slots, Q ring).
  CHECK(count(k.ptx, "mbarrier.init") == 12);
}

TEST_CASE("forward tma: tensor maps describe the caller's strides, and refuse what TMA cannot", "[runtime]") {
  // [batch 2, seq 1000, heads 8, d 128] contiguous: strides in bytes of seq, heads, batch.
  Tensor t;
  t.stride[0] = 1000 * 8 * 128, t.stride[1] = 8 * 128, t.stride[2] = 128;
  const rt::TensorMapShape s = rt::tensor_map_shape("k", t, 128, 1000, 8, 2);
  CHECK(std::vector<unsigned long long>(s.dims, s.dims + 4) == std::vector<unsigned long long>{128, 1000, 8, 2});
  CHECK(std::vector<unsigned long long>(s.strides, s.strides + 3) ==
        std::vector<unsigned long long>{8 * 128 * 2, 128 * 2, 1000 * 8 * 128 * 2});
  // One batch: its stride is never stepped (0 is allowed by the launch checks), and an empty
  // sequence still gets a one-row map, which no load reads.
  Tensor one = t;
  one.stride[0] = 0;
  const rt::TensorMapShape b1 = rt::tensor_map_shape("q", one, 128, 0, 8, 1);
  CHECK(b1.dims[1] == 1);
  CHECK(b1.strides[2] == 16);
  // Heads broadcast with stride 0: a usage error naming the stride and the knob.
  Tensor broadcast = t;
  broadcast.stride[2] = 0;
  CHECK_THROWS_WITH(rt::tensor_map_shape("v", broadcast, 128, 1000, 8, 2),
                    Catch::Contains("v.stride[2] (heads) is 0 elements over 8") && Catch::Contains("loads v") &&
                        Catch::Contains("FLASHJIT_TMA=off"));
  // O's map (the TMA store's): the same rule, said of a store.
  CHECK_THROWS_WITH(rt::tensor_map_shape("o", broadcast, 64, 1000, 8, 2),
                    Catch::Contains("o.stride[2] (heads) is 0 elements over 8") && Catch::Contains("stores o"));
  try {
    rt::tensor_map_shape("v", broadcast, 128, 1000, 8, 2);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
  }
  Tensor huge = t;
  huge.stride[0] = int64_t(1) << 39;  // 2^40 bytes
  CHECK_THROWS_WITH(rt::tensor_map_shape("q", huge, 128, 1000, 8, 2), Catch::Contains("q.stride[0] (batch)"));
}

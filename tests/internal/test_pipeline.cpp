// The pipeline's contract with its templates: registration, stages in order, one analysis per spec.
#include <llvm/Support/CommandLine.h>

#include <catch2/catch.hpp>

#include "compiler/codegen/target.hpp"
#include "compiler/kernel_key.hpp"
#include "compiler/pipeline.hpp"
#include "runtime/tuner.hpp"
#include "templates/bwd/plan.hpp"
#include "templates/common/arch_limits.hpp"
#include "templates/fwd/plan.hpp"

using namespace flashjit;

namespace {

AttentionSpec spec_of(int d, const std::string& mask = "causal") {
  AttentionSpec s;
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = d;
  s.mask = mask;
  return s;
}

// Whether plan_forward refuses `c` for `spec` on `t` with a message containing `text`.
bool refused_naming(const AttentionSpec& spec, const TileConfig& c, const Target& t, const std::string& text) {
  try {
    plan_forward(analyze_spec(spec), c, t);
  } catch (const Error& e) {
    return std::string(e.what()).find(text) != std::string::npos;
  }
  return false;
}

}  // namespace

TEST_CASE("pipeline: templates are registered by name with their own versions", "[pipeline]") {
  const KernelTemplate& fwd = find_template("attention_fwd");
  CHECK_FALSE(fwd.version.empty());
  CHECK(fwd.plan);
  CHECK(fwd.heuristic);
  const KernelTemplate& map = find_template("block_map");
  CHECK_FALSE(map.version.empty());
  CHECK(map.version != fwd.version);
  try {
    find_template("attention_bwd_v0");
    FAIL("an unknown template was found");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::internal);
    CHECK_THAT(e.what(), Catch::Contains("attention_fwd") && Catch::Contains("block_map"));
  }
}

TEST_CASE("pipeline: a compile analyses its spec once and runs the stages in order", "[pipeline]") {
  const uint64_t before = analyzed_spec_count();
  CompiledKernel k = compile_to_ptx(spec_of(64, "window(128, 0)"));
  CHECK(analyzed_spec_count() == before + 1);
  std::vector<std::string> names;
  for (const StageRecord& s : k.stages) names.push_back(s.name);
  CHECK(names == std::vector<std::string>(std::begin(kStages), std::end(kStages)));
  CHECK_THAT(k.stages[1].text, Catch::Contains("keys per query tile: exact") &&
                                   Catch::Contains("queries per key tile: exact; visit: q in [kv, kv + 128]"));
  CHECK_THAT(k.stages[2].text, Catch::Contains("reason: heuristic table") && Catch::Contains("templates=attention_fwd@"));
  // Every config planned from one analysed spec: no second analysis.
  AnalyzedSpecPtr a = analyze_spec(spec_of(128));
  const uint64_t once = analyzed_spec_count();
  for (TileConfig c : {TileConfig{64, 64, 4, 2}, TileConfig{128, 128, 8, 2}, TileConfig{64, 32, 4, 3}}) {
    KernelRequest r;
    r.target.arch = "sm_90a";
    r.config = c;
    plan_kernel(a, r);
  }
  CHECK(analyzed_spec_count() == once);
}

TEST_CASE("pipeline: the search space holds only configs the template can build", "[pipeline][tune]") {
  const KernelTemplate& fwd = find_template("attention_fwd");
  for (int d : {64, 128, 256}) {
    AnalyzedSpecPtr a = analyze_spec(spec_of(d));
    autotune::SearchSpace space = rt::search_space_for(*a, fwd);
    REQUIRE(space.legal);
    size_t legal = 0;
    for (int bm : space.block_m)
      for (int bn : space.block_n)
        for (int w : space.num_warps)
          for (int st : space.num_stages) {
            TileConfig c{bm, bn, w, st};
            CHECK(space.legal(c) == !fwd.check_shape(c));
            if (!space.legal(c)) continue;
            ++legal;
            // The plan's limits are the judge: the largest tiles of each space must build.
            if (bn == space.block_n.back() && st == space.num_stages.back())
              CHECK_NOTHROW(fwd.plan(a, c, Target{"sm_90a", true}));
          }
    CHECK(legal >= 4);
  }
  CHECK(fwd.search_space(*analyze_spec(spec_of(256))).block_n.back() <
        fwd.search_space(*analyze_spec(spec_of(64))).block_n.back());
  AttentionSpec t = spec_of(64);
  t.tune.block_m = {64};
  t.tune.num_stages = {3};
  autotune::SearchSpace narrowed = rt::search_space_for(*analyze_spec(t), fwd);
  CHECK(narrowed.block_m == std::vector<int>{64});
  CHECK(narrowed.num_warps == std::vector<int>{4, 2});  // derived: block_m = 16 or 32 × num_warps
  CHECK(narrowed.num_stages == std::vector<int>{3});
}

TEST_CASE("pipeline: tuning keys bucket shapes and ignore the spec name", "[pipeline][tune]") {
  AnalyzedSpecPtr s = analyze_spec(spec_of(64));
  ProblemShape x{2, 1000, 1000, 8, 8}, y{2, 1024, 600, 8, 8};
  const Target t = target_for(CompileOptions{}, "sm_90a");
  autotune::TuningKey a = rt::tuning_key(*s, t, x), b = rt::tuning_key(*s, t, y);
  CHECK(a.bucket.seq_q == 1024);
  CHECK(a.bucket.seq_q == b.bucket.seq_q);
  CHECK(a.bucket.seq_kv == b.bucket.seq_kv);
  AttentionSpec renamed = spec_of(64);
  renamed.name = "x";
  CHECK(analyze_spec(renamed)->spec_hash == s->spec_hash);
  CHECK(analyze_spec(spec_of(64, "none"))->spec_hash != s->spec_hash);
}

// The backward's dQ: summed in the dK/dV kernel (bulk reductions into a workspace) only where that
// kernel has wgmma, 64-query tiles, one launch for dK and dV and whole 64-column panels above
// d = 64; every other plan names why it keeps the dQ kernel, and its module has no conversion.
TEST_CASE("pipeline: the backward issues dP under S's softmax where its registers fit, and the d <= 64 heuristic",
          "[pipeline][backward]") {
  Target sm90{"sm_90a"}, sm80{"sm_80"};
  auto plan = [](int d, const Target& t, TileConfig c) { return plan_backward(analyze_spec(spec_of(d)), c, t); };
  // dK/dV: (d_qk + d_v) / 2 accumulators and the two block_m / 2 tiles within 128 registers.
  CHECK(plan(64, sm90, {64, 64, 4, 2}).kv.dp_early);
  CHECK(plan(64, sm90, {64, 128, 8, 2}).kv.dp_early);
  CHECK(plan(96, sm90, {32, 128, 8, 2}).kv.dp_early);
  CHECK_FALSE(plan(64, sm90, {128, 128, 8, 2}).kv.dp_early);
  CHECK_FALSE(plan(128, sm90, {64, 128, 8, 2}).kv.dp_early);
  CHECK_FALSE(plan(256, sm90, {32, 64, 4, 2}).kv.dp_early);
  // The dQ kernel has room at every head dim; mma.sync products are synchronous, so never there.
  CHECK(plan(256, sm90, {32, 64, 4, 2}).q.dp_early);
  CHECK_FALSE(plan(64, sm80, {64, 64, 4, 2}).kv.dp_early);
  CHECK_FALSE(plan(64, sm80, {64, 64, 4, 2}).q.dp_early);
  CHECK_THAT(plan(64, sm90, {64, 64, 4, 2}).describe(), Catch::Contains("dP early"));
  CHECK_THAT(plan(128, sm90, {64, 128, 8, 2}).describe(), !Catch::Contains("dP early"));
  // One warpgroup of 64 keys at d <= 64 with wgmma, past 128-query tiles in one stage, or 64 in two
  // with a score modifier (its derivative's registers); sm_80 keeps 128 keys on 8 warps.
  for (int d : {16, 64}) {
    const AnalyzedSpecPtr s = analyze_spec(spec_of(d));
    CHECK(backward_heuristic(*s, sm90, nullptr).str() == "bm128_bn64_w4_s1");
    CHECK(backward_heuristic(*s, sm80, nullptr).str() == "bm64_bn128_w8_s2");
    AttentionSpec capped = spec_of(d);
    capped.score = "30 * tanh(score / 30)";
    CHECK(backward_heuristic(*analyze_spec(capped), sm90, nullptr).str() == "bm64_bn64_w4_s2");
  }
}

TEST_CASE("pipeline: the backward plan sums dQ in the dK/dV kernel only where it can, and says why not",
          "[pipeline][backward]") {
  Target sm90{"sm_90a"}, sm80{"sm_80"}, sync{"sm_90a"};
  sync.allow_wgmma = false;
  auto plan = [](int d, const Target& t, TileConfig c, const std::string& score = "score") {
    AttentionSpec s = spec_of(d);
    s.score = score;
    return plan_backward(analyze_spec(s), c, t);
  };
  const BackwardPlan fused = plan(128, sm90, {64, 128, 8, 2});
  CHECK(fused.fused_dq);
  CHECK(fused.fused_dq_note.empty());
  CHECK_THAT(fused.describe(), Catch::Contains("dQ fused"));
  // dSᵀ (128 keys × 64 queries) and two 64 × 64 fp32 blocks after the rest, 1024-byte aligned.
  CHECK(fused.kv.ds % 1024 == 0);
  CHECK(fused.kv.dq == fused.kv.ds + 128 * 64 * 2);
  const BackwardEntries names = backward_entries(fused, "k");
  CHECK(names.dkdv_det == "k_kv");
  CHECK(names.dq_convert == "k_dqc");
  struct Case {
    int d;
    Target target;
    TileConfig config;
    const char* why;
  };
  for (const Case& c : {Case{64, sm90, {64, 128, 8, 2}, "d_qk <= 64"}, Case{96, sm90, {64, 128, 8, 2}, "serialises"},
                        Case{128, sm80, {64, 128, 8, 2}, "needs wgmma"}, Case{128, sync, {64, 128, 8, 2}, "needs wgmma"},
                        Case{128, sm90, {32, 128, 8, 2}, "block_m a multiple of 64"},
                        Case{256, sm90, {64, 64, 4, 1}, "two launches"}}) {
    INFO("d=" << c.d << " " << c.target.arch << " " << c.config.str());
    const BackwardPlan p = plan(c.d, c.target, c.config);
    CHECK_FALSE(p.fused_dq);
    CHECK_THAT(p.fused_dq_note, Catch::Contains("dQ by its own kernel: ") && Catch::Contains(c.why));
    CHECK_THAT(p.describe(), !Catch::Contains("dQ fused"));
    CHECK(backward_entries(p, "k").dq_convert.empty());
  }
}

// The dQ kernel: 64 queries on one warpgroup, or 128 on two where shared memory leaves room for
// one 64-query CTA per SM (wgmma only), with each warpgroup's registers unchanged.
TEST_CASE("pipeline: the backward's dQ kernel takes two warpgroups where one CTA of one would fill the SM",
          "[pipeline][backward]") {
  Target sm90{"sm_90a"}, sm80{"sm_80"}, sync{"sm_90a"};
  sync.allow_wgmma = false;
  auto plan = [](int d_qk, int d_v, const Target& t, TileConfig c) {
    AttentionSpec s = spec_of(d_qk);
    s.head_dim_v = d_v;
    return plan_backward(analyze_spec(s), c, t).q;
  };
  for (int d : {224, 256}) {
    INFO("d=" << d);
    const BackwardPass q = plan(d, d, sm90, {32, 64, 4, 2});
    CHECK(q.rows == 128);
    CHECK(q.warps == 8);
    CHECK(q.wgmma);
    CHECK(q.m_tiles == 1);  // 16 rows per warp, as on one warpgroup
    CHECK(q.cols == 32);
    CHECK(q.stages == 2);
    CHECK(q.shared_bytes <= 227 * 1024);
    CHECK(q.min_ctas_per_sm == 1);
  }
  // Two 64-query CTAs fit per SM (or mma.sync): one warpgroup each.
  for (auto [d_qk, d_v] : {std::pair{128, 128}, {192, 192}, {256, 128}, {64, 64}}) {
    INFO("d=" << d_qk << "/" << d_v);
    const BackwardPass q = plan(d_qk, d_v, sm90, {32, 64, 4, 2});
    CHECK(q.rows == 64);
    CHECK(q.warps == 4);
    CHECK(q.min_ctas_per_sm >= 2);
  }
  for (const Target& t : {sm80, sync}) {
    const BackwardPass q = plan(256, 256, t, {32, 64, 4, 2});
    CHECK(q.rows == 64);
    CHECK(q.warps == 4);
    CHECK_FALSE(q.wgmma);
  }
  CHECK_THAT(plan_backward(analyze_spec(spec_of(256)), {32, 64, 4, 2}, sm90).describe(),
             Catch::Contains("dq: 128x32 s2 wgmma"));
}

TEST_CASE("pipeline: the forward gets a producer warpgroup only where it was measured to pay, and says why not",
          "[pipeline]") {
  Target sm90{"sm_90a"}, sm80{"sm_80"};
  auto plan = [](int d, const Target& t, TileConfig c, const std::string& mask = "causal") {
    return plan_forward(analyze_spec(spec_of(d, mask)), c, t);
  };
  const ForwardPlan p = plan(128, sm90, {128, 128, 8, 2});
  REQUIRE(p.producer);
  CHECK(p.threads == 384);
  CHECK(p.compute_threads == 256);
  // Q, the K/V stages, then the persistent walk's second Q buffer (at a multiple of 1024 bytes,
  // as wgmma's swizzle needs) and the mbarriers.
  CHECK(p.q_buffers == 2);
  CHECK(p.smem.q2 == 128 * 128 * 2 + 2 * 2 * 128 * 128 * 2);
  CHECK(p.smem.q2 % 1024 == 0);
  // O's staging buffer (128 rows of 128 bf16) after it, then the mbarriers.
  CHECK(p.staged_store);
  CHECK(p.smem.o_stage == p.smem.q2 + 128 * 128 * 2);
  CHECK(p.smem.barriers == p.smem.o_stage + 128 * 128 * 2);
  // The rotated walk: a full and an empty mbarrier per stage for K and another pair for V, eight
  // for the walk (tile slot and Q ring, a full and an empty each, two of each), then the walk's
  // tile index (8 bytes), within sm_90's 227 KB.
  CHECK(p.rotated);
  CHECK(p.smem.walk_bars == 2 * 2 * 2 * 8);
  CHECK(p.smem.tile_slots == p.smem.walk_bars + 8 * 8);
  CHECK(p.shared_bytes == p.smem.barriers + p.smem.tile_slots + 8 + 1024);
  CHECK(p.shared_bytes <= 227 * 1024);
  CHECK(p.shared_bytes == 230536);
  CHECK_THAT(p.describe(), Catch::Contains("+persistent(q-ahead) +rotated +pingpong +staged-store"));
  // d = 256 has no room for a second 64 KB Q buffer beside two stages of K/V: one.
  const ForwardPlan wide = plan(256, sm90, {128, 64, 8, 2});
  REQUIRE(wide.producer);
  CHECK(wide.q_buffers == 1);
  CHECK(wide.smem.barriers == 128 * 256 * 2 + 2 * 2 * 64 * 256 * 2);
  CHECK_THAT(wide.describe(), !Catch::Contains("q-ahead"));
  // nor for O's 64 KB staging buffer: O is staged in the Q buffer, which it fits exactly.
  CHECK(wide.staged_store);
  CHECK(wide.stage_in_q);
  CHECK_THAT(wide.describe(), Catch::Contains("+staged-store(q)"));
  // nor for the rotated walk's P held live beside S (measured slower there): one pair per stage.
  CHECK_FALSE(wide.rotated);
  CHECK_FALSE(wide.kv_bars);
  CHECK(wide.smem.walk_bars == 2 * 2 * 8);
  CHECK(wide.shared_bytes == wide.smem.barriers + 2 * 2 * 8 + 8 * 8 + 8 + 1024);
  CHECK(p.min_ctas_per_sm == 1);
  CHECK_THAT(p.describe(), Catch::Contains("+producer"));
  // setmaxnreg moves registers within the launch's allocation (168 per thread at 384 threads):
  // asking for more blocks setmaxnreg.inc forever.
  CHECK(p.compute_registers == 232);
  CHECK(p.producer_registers == 40);
  CHECK(128 * p.producer_registers + p.compute_threads * p.compute_registers <= p.threads * (65536 / p.threads / 8 * 8));
  CHECK(p.producer_registers % 8 == 0);
  CHECK(plan(64, sm90, {128, 128, 8, 4}).producer);  // d = 64 with four stages: one CTA per SM
  auto why = [&](int d, const Target& t, TileConfig c, const std::string& mask = "causal") {
    ForwardPlan q = plan(d, t, c, mask);
    CHECK_FALSE(q.producer);
    CHECK(q.threads == 32 * c.num_warps);
    // No producer's mbarriers; the CTA-wide walk loading by tensor map has its stages' and Q's.
    CHECK(q.smem.barriers == (q.tma ? q.smem.total - 16 * c.num_stages - 8 : 0));
    auto reason = producer_blocker(q);
    return reason ? *reason : std::string("(none)");
  };
  CHECK_THAT(why(128, sm80, {128, 128, 8, 2}), Catch::Contains("wgmma"));
  CHECK_THAT(why(64, sm90, {64, 128, 4, 2}), Catch::Contains("num_warps 8"));
  CHECK(plan(256, sm90, {128, 64, 8, 2}).producer);  // d = 256: 192 KB of shared memory, one CTA per SM
  // Under the driver's JIT (no setmaxnreg) d = 256 keeps the CTA-wide kernel; d = 128 gains anyway.
  Target driver = sm90;
  driver.moves_registers = false;
  CHECK(plan(128, driver, {128, 128, 8, 2}).producer);
  CHECK_THAT(why(256, driver, {128, 64, 8, 2}), Catch::Contains("driver's JIT ignores setmaxnreg"));
  // The two d = 256 plans are different kernels: their keys differ.
  const KernelTemplate& fwd = find_template("attention_fwd");
  AnalyzedSpecPtr a256 = analyze_spec(spec_of(256));
  const TileConfig c256{128, 64, 8, 2};
  CHECK(make_kernel_key(*a256, *fwd.plan(a256, c256, sm90), c256, "sm_90a").hash !=
        make_kernel_key(*a256, *fwd.plan(a256, c256, driver), c256, "sm_90a").hash);
  CHECK_THAT(why(192, sm90, {128, 64, 8, 2}), Catch::Contains("head dims"));
  CHECK_THAT(why(96, sm90, {128, 128, 8, 2}), Catch::Contains("head dims"));
  CHECK_THAT(why(128, sm90, {128, 64, 8, 2}), Catch::Contains("more than one CTA per SM"));
  Target split = sm90;
  split.split_kv = true;
  CHECK_THAT(why(128, split, {128, 128, 8, 2}), Catch::Contains("split-KV"));
  Target packed = sm90;
  packed.pack_gqa = 4;
  CHECK_THAT(why(128, packed, {128, 128, 8, 2}), Catch::Contains("GQA packing"));
  // A mask with no closed-form key range walks the block map's list, producer and compute warps
  // alike (docs/perf-notes.md §21).
  const std::string listed = "kv % 3 == 0";
  REQUIRE(analyze_spec(spec_of(128, listed))->block_map.needed);
  CHECK(plan(128, sm90, {128, 128, 8, 2}, listed).producer);
  CHECK_THAT(plan(256, sm90, {128, 64, 8, 2}, listed).describe(), Catch::Contains("+blockmap +producer"));
  CHECK_THAT(why(128, sm90, {64, 128, 4, 2}, listed), Catch::Contains("num_warps 8"));
}

TEST_CASE("pipeline: CodeGenPrepare re-walks only the blocks it changed", "[pipeline]") {
  // Without it every new kernel pays some 30 walks of CodeGenPrepare over the whole function, each
  // re-parsing every wgmma's constraint string (compiler/codegen/target.cpp): the option must exist
  // in the LLVM this library links, and be set once LLVM is initialised.
  codegen::init_llvm();
  auto& options = llvm::cl::getRegisteredOptions();
  auto it = options.find("cgpp-huge-func");
  REQUIRE(it != options.end());
  CHECK(static_cast<llvm::cl::opt<unsigned>*>(it->second)->getValue() == 0);
}

TEST_CASE("pipeline: a masked forward walks its query tiles from the last, so the longest start first", "[pipeline]") {
  Target sm90{"sm_90a"};
  auto plan = [](const std::string& mask, const Target& t) {
    return plan_forward(analyze_spec(spec_of(128, mask)), TileConfig{128, 128, 8, 2}, t);
  };
  CHECK(plan("causal", sm90).last_tile_first);
  CHECK(plan("window(256, 0)", sm90).last_tile_first);
  CHECK(plan("kv % 3 == 0", sm90).last_tile_first);  // a block map: the tile ranges differ by row too
  CHECK_THAT(plan("causal", sm90).describe(), Catch::Contains("+last-tile-first"));
  CHECK_FALSE(plan("", sm90).last_tile_first);  // every tile does the same work: grid order is as good
  // Split-KV decode and varlen keep grid order: their grids are not one query tile per x.
  Target split = sm90, varlen = sm90;
  split.split_kv = true;
  varlen.varlen = true;
  CHECK_FALSE(plan("causal", split).last_tile_first);
  CHECK_FALSE(plan("causal", varlen).last_tile_first);
  // A kernel of one CTA per tile (no producer warpgroup: one warpgroup here) reads %nctaid.x to
  // turn the CTA's x into its tile only when it reverses.
  CompileOptions one_warpgroup;
  one_warpgroup.config = TileConfig{64, 128, 4, 2};
  CHECK_THAT(compile_to_ptx(spec_of(128, "causal"), one_warpgroup).ptx, Catch::Contains("%nctaid.x"));
  CHECK_THAT(compile_to_ptx(spec_of(128, ""), one_warpgroup).ptx, !Catch::Contains("%nctaid.x"));
}

TEST_CASE("pipeline: producer plans walk their tiles as persistent CTAs, and the others do not", "[pipeline]") {
  Target sm90{"sm_90a"};
  auto plan = [](const std::string& mask, const TileConfig& c, const Target& t) {
    return plan_forward(analyze_spec(spec_of(128, mask)), c, t);
  };
  const ForwardPlan p = plan("causal", TileConfig{128, 128, 8, 2}, sm90);
  CHECK(p.producer);
  CHECK(p.persistent);
  CHECK_THAT(p.describe(), Catch::Contains("+producer +persistent"));
  CHECK(plan("kv % 3 == 0", TileConfig{128, 128, 8, 2}, sm90).persistent);  // a block map's walk too
  CHECK_FALSE(plan("causal", TileConfig{64, 128, 4, 2}, sm90).persistent);  // no producer warpgroup
  Target split = sm90;
  split.split_kv = true;
  CHECK_FALSE(plan("causal", TileConfig{128, 128, 8, 2}, split).persistent);
  // The runtime learns it from the compiled kernel, and launches such kernels one CTA per SM.
  const CompiledKernel c = compile_to_ptx(spec_of(128, "causal"));
  CHECK(c.persistent);
  // The claimed tile index and each tile's Q go through mbarriers: the one CTA barrier left is
  // the one after their initialisation, and no named barrier makes every compute warp meet at
  // the tile boundary (perf-notes §27). The only named barriers are the warpgroups' turns
  // (ForwardPlan::pingpong, 4 + warpgroup, 256 threads), which order the two warpgroups' issues
  // and run on from tile to tile: a wait before the first S, before each P·V (two sites: in the
  // loop and after it), a hand-over after each, and the second warpgroup's first hand-over. Four
  // mbarriers per stage (the rotated walk's K and V pairs) and eight for the walk.
  auto count = [&](const std::string& ptx, const std::string& what) {
    size_t n = 0;
    for (size_t at = ptx.find(what); at != std::string::npos; at = ptx.find(what, at + 1)) ++n;
    return n;
  };
  CHECK(count(c.ptx, "bar.sync") == 1);
  CHECK(count(c.ptx, "bar.sync \t0;") == 1);
  CHECK(count(c.ptx, "barrier.sync") == 3);
  CHECK(count(c.ptx, "barrier.sync \t%r") == 3);
  CHECK(count(c.ptx, "\tbar.arrive %r") == 4);
  CHECK(count(c.ptx, "\tbarrier.arrive") == 0);
  CHECK(count(c.ptx, "mbarrier.init.shared.b64") == 2 * 4 + 8);
  // The rotated walk commits the P·V and the next S products with no wait between them; the
  // walk that waits for each product never does.
  auto commits_back_to_back = [](const std::string& ptx) {
    bool committed = false;
    for (size_t at = ptx.find("wgmma."); at != std::string::npos; at = ptx.find("wgmma.", at + 1)) {
      if (ptx.compare(at, 18, "wgmma.commit_group") == 0) {
        if (committed) return true;
        committed = true;
      } else if (ptx.compare(at, 16, "wgmma.wait_group") == 0) {
        committed = false;
      }
    }
    return false;
  };
  CHECK(commits_back_to_back(c.ptx));
  // d = 256 has one Q buffer, which the producer loads through the Q ring's mbarriers as at d = 128
  // (ForwardPlan::stage_in_v): the compute warps' own named barrier (256 threads) only orders
  // every warp's last P·V before O is staged in the V stage. One stage's K and V pairs, and the
  // walk's eight. Its warpgroups take turns (ForwardPlan::pingpong): each waits for its turn
  // before S and before P·V, and hands it over after issuing each; the second warpgroup hands the
  // first turn over once, before the tile loop.
  const CompiledKernel wide = compile_to_ptx(spec_of(256, "causal"));
  REQUIRE(wide.persistent);
  CHECK_THAT(wide.description, Catch::Contains("+pingpong"));
  CHECK(count(wide.ptx, "barrier.sync \t3, 256;") == 1);
  CHECK(count(wide.ptx, "bar.sync") == 1);
  CHECK(count(wide.ptx, "barrier.sync \t%r") == 2);  // barrier 4 + warpgroup
  CHECK(count(wide.ptx, "\tbar.arrive %r") == 3);    // barrier 5 − warpgroup, and 4 at the start
  CHECK(count(wide.ptx, "\tbarrier.arrive") == 0);
  CHECK(count(wide.ptx, "mbarrier.init.shared.b64") == 1 * 4 + 8);
  // With two stages (64-key tiles) the compute warps load Q: the named barrier orders their
  // copies before their products, their last products before O is staged in the Q buffer, and
  // every warp's read of its staged rows before the next copies (no Q ring's mbarriers).
  CompileOptions two_stages;
  two_stages.config = TileConfig{128, 64, 8, 2};
  const CompiledKernel wide2 = compile_to_ptx(spec_of(256, "causal"), two_stages);
  REQUIRE(wide2.persistent);
  CHECK(count(wide2.ptx, "barrier.sync \t3, 256;") == 3);
  CHECK_THAT(wide2.description, !Catch::Contains("+pingpong"));
  CHECK(count(wide2.ptx, "bar.arrive") == 0);
  CHECK(count(wide2.ptx, "mbarrier.init.shared.b64") == 2 * 2 + 4);
  CHECK_FALSE(commits_back_to_back(wide.ptx));
  CompileOptions one_warpgroup;
  one_warpgroup.config = TileConfig{64, 128, 4, 2};
  CHECK_FALSE(compile_to_ptx(spec_of(128, "causal"), one_warpgroup).persistent);
}

TEST_CASE("pipeline: d = 64 takes 64-key tiles for a window of at most 1024 keys per row", "[pipeline]") {
  const Target sm90{"sm_90a"};
  auto block_n = [&](const std::string& mask, int d = 64) {
    return forward_heuristic(*analyze_spec(spec_of(d, mask)), sm90, nullptr).block_n;
  };
  CHECK(block_n("window(255, 0)") == 64);
  CHECK(block_n("window(1023, 0) && causal") == 64);  // 1024 keys
  CHECK(block_n("window(511, 512)") == 64);           // both sides: 1024 keys
  CHECK(block_n("window(1024, 0)") == 96);            // 1025 keys: the table's 128 × 96 tile
  CHECK(block_n("window(4095, 0) && causal") == 96);
  CHECK(block_n("causal") == 96);
  CHECK(block_n("none") == 96);
  CHECK(block_n("window(255, 0)", 128) == 128);  // the producer kernel keeps its tile
  std::string why;
  forward_heuristic(*analyze_spec(spec_of(64, "window(255, 0)")), sm90, &why);
  CHECK_THAT(why, Catch::Contains("a window of 256 keys per row"));
  // A window whose width is a param is not a constant: the table's tile.
  AttentionSpec param = spec_of(64, "kv >= q - w && kv <= q");
  param.params = {{"w", ScalarType::i32}};
  CHECK(forward_heuristic(*analyze_spec(param), sm90, nullptr).block_n == 96);
}

TEST_CASE("pipeline: d = 64 runs 128 rows on 96-key tiles, two CTAs per SM, where TMA loads a whole sequence",
          "[pipeline]") {
  const Target sm90{"sm_90a"};
  auto heuristic = [](const std::string& mask, const Target& t, int d = 64) {
    return forward_heuristic(*analyze_spec(spec_of(d, mask)), t, nullptr).str();
  };
  for (const char* mask : {"none", "causal", "causal_br"}) {
    INFO(mask);
    CHECK(heuristic(mask, sm90) == "bm128_bn96_w8_s2");
    const ForwardPlan p = plan_forward(analyze_spec(spec_of(64, mask)), TileConfig{128, 96, 8, 2}, sm90);
    CHECK(p.tma);
    CHECK_FALSE(p.producer);
    CHECK(p.min_ctas_per_sm == 2);  // the estimate alone (80 + 56 registers) would give one
    // Only the unmasked kernel stages O in Q: in the masked ones it measured flat, and ptxas spills 8 B.
    CHECK(p.staged_store == (std::string(mask) == "none"));
    CHECK(p.tma_store == (std::string(mask) == "none"));
  }
  // Three stages still fit twice in an SM's shared memory; four do not, and get one CTA's registers.
  CHECK(plan_forward(analyze_spec(spec_of(64, "none")), TileConfig{128, 96, 8, 3}, sm90).min_ctas_per_sm == 2);
  CHECK(plan_forward(analyze_spec(spec_of(64, "none")), TileConfig{128, 96, 8, 4}, sm90).min_ctas_per_sm == 1);
  // The forms that keep the one-warpgroup tile: serving forms, no TMA, mma.sync, other head dims.
  Target split = sm90, packed = sm90, no_tma = sm90, sync = sm90;
  split.split_kv = true;
  packed.pack_gqa = 4;
  no_tma.tma = false;
  sync.allow_wgmma = false;
  CHECK(heuristic("causal", split) == "bm64_bn128_w4_s2");
  CHECK(heuristic("causal", packed) == "bm64_bn128_w4_s2");
  CHECK(heuristic("causal", no_tma) == "bm64_bn128_w4_s2");
  CHECK(heuristic("causal", Target{"sm_80"}) == "bm128_bn64_w4_s2");
  CHECK(heuristic("causal", sync) == "bm128_bn64_w4_s2");
  CHECK(heuristic("causal", sm90, 32) == "bm64_bn128_w4_s2");
  AttentionSpec doc = spec_of(64, "causal && document(doc)"), soft = spec_of(64, "causal");
  doc.tensors = {{"doc", ScalarType::i32, {"seq_kv"}}};
  soft.score = "30 * tanh(score / 30)";
  CHECK(forward_heuristic(*analyze_spec(doc), sm90, nullptr).str() == "bm64_bn128_w4_s2");  // a block map
  CHECK(forward_heuristic(*analyze_spec(soft), sm90, nullptr).str() == "bm64_bn128_w4_s2");
  CHECK(heuristic("causal", sm90, 128) == "bm128_bn128_w8_s2");
  // 96-key tiles anywhere else are refused, naming the one kernel that has them.
  auto refused = [](int d, const TileConfig& c, const Target& t) {
    return refused_naming(spec_of(d, "causal"), c, t, "block_n 96 is built for one kernel only");
  };
  const TileConfig t96{128, 96, 8, 2};
  CHECK(refused(128, t96, sm90));
  CHECK(refused(32, t96, sm90));
  CHECK(refused(64, TileConfig{64, 96, 4, 2}, sm90));
  CHECK(refused(64, t96, split));
  CHECK(refused(64, t96, packed));
  CHECK(refused(64, t96, no_tma));
  CHECK(refused(64, t96, Target{"sm_80"}));
  CHECK_FALSE(refused(64, t96, sm90));
}

TEST_CASE("pipeline: the lazy rescale runs on the unmasked walks of 96- and 176-key tiles, where it measured faster",
          "[pipeline]") {
  const Target sm90{"sm_90a"};
  auto grow_at = [&](int d, const std::string& mask, const TileConfig& c, const std::string& score = "") {
    AttentionSpec s = spec_of(d, mask);
    if (!score.empty()) s.score = score;
    return plan_forward(analyze_spec(s), c, sm90).grow_at;
  };
  const TileConfig t96{128, 96, 8, 2}, t176{128, 176, 8, 2}, t128{128, 128, 8, 2};
  CHECK(grow_at(64, "none", t96) == 8.f);
  CHECK(grow_at(128, "none", t176) == 8.f);
  // Masked walks (flat at d = 64, slower at d = 128), a score modifier (not measured) and d = 128's
  // 128-key tiles (flat) rescale O at every step.
  CHECK(grow_at(64, "causal", t96) == 0.f);
  CHECK(grow_at(128, "causal", t176) == 0.f);
  CHECK(grow_at(128, "none", t176, "30 * tanh(score / 30)") == 0.f);
  CHECK(grow_at(128, "none", t128) == 0.f);
  CHECK(grow_at(64, "none", TileConfig{64, 128, 4, 2}) == 0.f);
  CompileOptions o;
  o.config = t96;
  const std::string ptx = compile_to_ptx(spec_of(64, "none"), o).ptx;
  CHECK(ptx.find("vote.sync.any.pred") != std::string::npos);
}

TEST_CASE("pipeline: 176-key tiles are d = 128's producer kernel's alone, with one Q buffer and O stored directly",
          "[pipeline]") {
  const Target sm90{"sm_90a"};
  const TileConfig t176{128, 176, 8, 2};
  for (const char* mask : {"none", "causal"}) {
    INFO(mask);
    const ForwardPlan p = plan_forward(analyze_spec(spec_of(128, mask)), t176, sm90);
    CHECK(p.producer);
    CHECK(p.tma);
    CHECK(p.rotated);
    // Q, two stages of 176-key K and V tiles: 208 KB; neither a second Q buffer nor a staging buffer
    // for O fits beside them.
    CHECK(p.q_buffers == 1);
    CHECK_FALSE(p.staged_store);
    CHECK(p.shared_bytes <= max_shared_bytes("sm_90a"));
  }
  CHECK(forward_heuristic(*analyze_spec(spec_of(128, "none")), sm90, nullptr).str() == "bm128_bn128_w8_s2");
  auto refused = [](int d, const TileConfig& c, const Target& t) {
    return refused_naming(spec_of(d, "none"), c, t, "block_n 176 is built for one kernel only");
  };
  Target split = sm90, no_tma = sm90, driver = sm90;
  split.split_kv = true;
  no_tma.tma = false;
  driver.moves_registers = false;
  CHECK(refused(64, t176, sm90));
  CHECK(refused(128, TileConfig{64, 176, 4, 2}, sm90));
  CHECK(refused(128, t176, split));
  CHECK(refused(128, t176, no_tma));
  CHECK(refused(128, t176, driver));
  CHECK(refused(128, t176, Target{"sm_80"}));
  CHECK_FALSE(refused(128, t176, sm90));
}

TEST_CASE(
    "pipeline: d = 256 without a block map takes 128-key tiles in one stage where the TMA producer runs, with "
    "the lazy rescale and 240 registers",
    "[pipeline]") {
  const Target sm90{"sm_90a"};
  auto heuristic = [](const AttentionSpec& s, const Target& t) {
    return forward_heuristic(*analyze_spec(s), t, nullptr);
  };
  auto is = [](const TileConfig& c, TileConfig want) { return autotune::same_config(c, want); };
  CHECK(is(heuristic(spec_of(256, "none"), sm90), {128, 128, 8, 1}));
  CHECK(is(heuristic(spec_of(256, "causal"), sm90), {128, 128, 8, 1}));
  CHECK(is(heuristic(spec_of(256, "window(1024, 0)"), sm90), {128, 128, 8, 1}));
  // With a block map (a mask that reads a tensor), scored, or in a form without the producer
  // (packed GQA, split-KV, varlen, paged K/V), or without TMA or setmaxnreg: the 64-key tiles in
  // two stages.
  AttentionSpec doc = spec_of(256, "causal && document(doc)");
  doc.tensors = {{"doc", ScalarType::i32, {"seq_kv"}}};
  CHECK(is(heuristic(doc, sm90), {128, 64, 8, 2}));
  AttentionSpec scored = spec_of(256, "none");
  scored.score = "30 * tanh(score / 30)";
  CHECK(is(heuristic(scored, sm90), {128, 64, 8, 2}));
  for (int form = 0; form < 6; ++form) {
    Target t = sm90;
    if (form == 0) t.pack_gqa = 2;
    if (form == 1) t.split_kv = true;
    if (form == 2) t.varlen = true;
    if (form == 3) t.paged = true;
    if (form == 4) t.tma = false;
    if (form == 5) t.moves_registers = false;
    INFO("form " << form);
    CHECK(is(heuristic(spec_of(256, "none"), t), {128, 64, 8, 2}));
  }
  CHECK(is(heuristic(spec_of(128, "none"), sm90), {128, 128, 8, 2}));
  // S (64) and O (128) accumulators per thread: 240 registers, the producer's one thread the 24
  // left, and the lazy rescale; the 64-key tiles keep 232 and the rescale at every step.
  const ForwardPlan wide = plan_forward(analyze_spec(spec_of(256, "none")), {128, 128, 8, 1}, sm90);
  REQUIRE(wide.producer);
  CHECK(wide.compute_registers == 240);
  CHECK(wide.producer_registers == 24);
  CHECK(wide.grow_at == 8.f);
  CHECK_THAT(wide.describe(), Catch::Contains("+lazy-rescale"));
  // One stage: K and V each have their own full and empty mbarrier, so K is refilled while P·V
  // still reads V.
  CHECK(wide.kv_bars);
  CHECK(wide.smem.walk_bars == 1 * 4 * 8);
  const ForwardPlan narrow = plan_forward(analyze_spec(spec_of(256, "none")), {128, 64, 8, 2}, sm90);
  CHECK(narrow.compute_registers == 232);
  CHECK(narrow.grow_at == 0.f);
  CHECK_FALSE(narrow.kv_bars);
  // The rescale is one warp vote per key tile and O's multiplies in a branch it guards.
  auto count = [](const std::string& ptx, const std::string& what) {
    size_t n = 0;
    for (size_t at = ptx.find(what); at != std::string::npos; at = ptx.find(what, at + 1)) ++n;
    return n;
  };
  const CompiledKernel k = compile_to_ptx(spec_of(256, "none"));
  CHECK(k.config.block_n == 128);
  CHECK(count(k.ptx, "vote.sync.any.pred") == 1);
  CHECK(count(k.ptx, "mbarrier.init.shared.b64") == 1 * 4 + 8);  // the Q ring's too (stage_in_v)
  CHECK(count(k.ptx, "mbarrier.arrive.expect_tx") == 3);         // Q's tile, K's, then V's
  CompileOptions narrow_tiles;
  narrow_tiles.config = TileConfig{128, 64, 8, 2};
  const std::string narrow_ptx = compile_to_ptx(spec_of(256, "causal"), narrow_tiles).ptx;
  CHECK(count(narrow_ptx, "vote.sync") == 0);
  // P·V across V's four panels in one instruction per 16 keys (MmaShape::whole_pv): eight per
  // 128-key tile; a 64-key kernel four; none in the backward. At d_v = 128 the rotated walk's
  // P·V spans both panels: m64n128k16 like S, eight of each per 128-key tile, each issued at
  // two sites (in the loop, and the first S / last P·V on their own).
  CHECK(count(k.ptx, "wgmma.mma_async.sync.aligned.m64n256k16") == 8);
  CHECK(count(k.ptx, "wgmma.mma_async.sync.aligned.m64n64k16") == 0);
  CHECK(count(narrow_ptx, "wgmma.mma_async.sync.aligned.m64n256k16") == 4);
  const std::string d128 = compile_to_ptx(spec_of(128, "none")).ptx;
  CHECK(count(d128, "m64n256k16") == 0);
  CHECK(count(d128, "vote.sync") == 0);
  CHECK(count(d128, "wgmma.mma_async.sync.aligned.m64n128k16") == 32);
  CHECK(count(d128, "m64n64k16") == 0);
  CompileOptions backward;
  backward.backward = true;
  CHECK(count(compile_to_ptx(spec_of(256, "causal"), backward).ptx, "m64n256k16") == 0);
}

// The keys tunings are filed under: a tuning is reused only on the kernels it was timed on (the
// same template version and the same code-changing switches), and the backward's never meet the
// forward's.
#include <catch2/catch.hpp>
#include <set>

#include "compiler/analyzed_spec.hpp"
#include "compiler/kernel_template.hpp"
#include "compiler/pipeline.hpp"
#include "runtime/tuner.hpp"
#include "support/knobs.hpp"

using namespace flashjit;

namespace {

AnalyzedSpecPtr causal64() {
  AttentionSpec s;
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = 64;
  s.mask = "causal";
  return analyze_spec(s);
}

ProblemShape shape1000() {
  ProblemShape shape;
  shape.batch = 2, shape.heads_q = shape.heads_kv = 8, shape.seq_q = shape.seq_kv = 1000;
  return shape;
}

}  // namespace

TEST_CASE("tuning keys: the template's version leads, and the backward's never meet the forward's",
          "[tune][backward]") {
  const AnalyzedSpecPtr a = causal64();
  const Target t = target_for(CompileOptions{}, "sm_90a");
  const autotune::TuningKey fwd = rt::tuning_key(*a, t, shape1000()), bwd = rt::tuning_key(*a, t, shape1000(), true);
  const std::string fv = find_template("attention_fwd").version, bv = find_template("attention_bwd").version;
  CHECK_THAT(fv, Catch::StartsWith("fwd-"));
  CHECK(fwd.spec_hash == fv + "-" + a->spec_hash);
  CHECK(fwd.str() == fv + "-" + a->spec_hash + "/sq1024_skv1024_bh16_d64x64");
  // FLASHJIT_BWD_WARPGROUPS and FLASHJIT_BWD_PRODUCER (on by default) file their tunings apart from
  // those made with them off.
  const bool warpgroups = knob::get("FLASHJIT_BWD_WARPGROUPS") == "on";
  const bool producer = knob::get("FLASHJIT_BWD_PRODUCER") == "on";
  CHECK(bwd.spec_hash == bv + (warpgroups ? "+wg" : "") + (producer ? "+prod" : "") + "-" + a->spec_hash);
  CHECK_THAT(bwd.spec_hash, Catch::StartsWith("bwd-"));
  CHECK(bwd.bucket == fwd.bucket);
  CHECK_FALSE(bwd == fwd);
  CHECK(rt::tuned_reason("2026-12-01T00:00:00Z", "quick", 1.5, "b") ==
        "tuned 2026-12-01T00:00:00Z (quick, 1.500 ms median for bucket b)");
}

TEST_CASE("tuning keys: every switch that changes sm_90a's kernels keys its own tunings", "[tune]") {
  const AnalyzedSpecPtr a = causal64();
  const Target base = target_for(CompileOptions{}, "sm_90a");
  REQUIRE(base.allow_wgmma);
  REQUIRE_FALSE(base.quick);
  auto with = [&](auto&& change) {
    Target t = base;
    t.tma = t.moves_registers = true;
    t.backward_warpgroups = t.backward_producer = true;
    change(t);
    return t;
  };
  const Target on = with([](Target&) {});
  const Target sync = with([](Target& t) { t.allow_wgmma = false; });
  const Target notma = with([](Target& t) { t.tma = false; });
  const Target jit = with([](Target& t) { t.moves_registers = false; });
  const Target quick = with([](Target& t) { t.quick = true; });
  const Target nowg = with([](Target& t) { t.backward_warpgroups = false; });
  const Target noprod = with([](Target& t) { t.backward_producer = false; });
  const std::string fv = find_template("attention_fwd").version, bv = find_template("attention_bwd").version;
  CHECK(rt::kernel_family(on, false) == fv);
  CHECK(rt::kernel_family(sync, false) == fv + "+sync");
  CHECK(rt::kernel_family(notma, false) == fv + "+notma");
  CHECK(rt::kernel_family(jit, false) == fv + "+jit");
  CHECK(rt::kernel_family(quick, false) == fv + "+quick");
  CHECK(rt::kernel_family(on, true) == bv + "+wg+prod");
  CHECK(rt::kernel_family(sync, true) == bv + "+wg+prod+sync");
  CHECK(rt::kernel_family(jit, true) == bv + "+wg+prod+jit");
  CHECK(rt::kernel_family(nowg, true) == bv + "+prod");
  CHECK(rt::kernel_family(noprod, true) == bv + "+wg");
  // The forward's kernels do not read the backward's switches, nor the backward's TMA and quick.
  CHECK(rt::kernel_family(nowg, false) == fv);
  CHECK(rt::kernel_family(notma, true) == bv + "+wg+prod");
  CHECK(rt::kernel_family(quick, true) == bv + "+wg+prod");
  // Six forward kernel families, six keys for one shape.
  std::set<std::string> keys;
  for (const Target& t : {on, sync, notma, jit, quick, with([](Target& t) { t.tma = false, t.quick = true; })})
    keys.insert(rt::tuning_key(*a, t, shape1000()).str());
  CHECK(keys.size() == 6);
  // Off sm_90a there is no wgmma, TMA or setmaxnreg: those switches leave the kernels and the key
  // as they are.
  Target ampere = target_for(CompileOptions{}, "sm_80");
  const std::string plain = rt::kernel_family(ampere, false);
  ampere.allow_wgmma = ampere.tma = ampere.moves_registers = false;
  CHECK(plain == fv);
  CHECK(rt::kernel_family(ampere, false) == plain);
}

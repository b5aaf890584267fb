// The keys tunings are filed under: the backward's never meet the forward's, and the forward's
// are what earlier flashjit versions wrote (their files stay valid).
#include <catch2/catch.hpp>

#include "compiler/analyzed_spec.hpp"
#include "compiler/kernel_template.hpp"
#include "runtime/tuner.hpp"
#include "support/knobs.hpp"

using namespace flashjit;

TEST_CASE("tuning keys: the backward's key is the forward's spec hash prefixed with bwd-", "[tune][backward]") {
  AttentionSpec s;
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = 64;
  s.mask = "causal";
  const AnalyzedSpecPtr a = analyze_spec(s);
  ProblemShape shape;
  shape.batch = 2, shape.heads_q = shape.heads_kv = 8, shape.seq_q = shape.seq_kv = 1000;
  const autotune::TuningKey fwd = rt::tuning_key(*a, shape), bwd = rt::tuning_key(*a, shape, true);
  CHECK(fwd.spec_hash == a->spec_hash);
  CHECK(fwd.str() == a->spec_hash + "/sq1024_skv1024_bh16_d64x64");
  // FLASHJIT_BWD_WARPGROUPS and FLASHJIT_BWD_PRODUCER (on by default) file their tunings apart from
  // those made with them off.
  const bool warpgroups = knob::get("FLASHJIT_BWD_WARPGROUPS") == "on";
  const bool producer = knob::get("FLASHJIT_BWD_PRODUCER") == "on";
  CHECK(bwd.spec_hash == find_template("attention_bwd").version + (warpgroups ? "+wg" : "") +
                             (producer ? "+prod" : "") + "-" + a->spec_hash);
  CHECK_THAT(bwd.spec_hash, Catch::StartsWith("bwd-"));
  CHECK(bwd.bucket == fwd.bucket);
  CHECK_FALSE(bwd == fwd);
  CHECK(rt::tuned_reason("2026-12-01T00:00:00Z", "quick", 1.5, "b") ==
        "tuned 2026-12-01T00:00:00Z (quick, 1.500 ms median for bucket b)");
}

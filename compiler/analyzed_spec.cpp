#include "compiler/analyzed_spec.hpp"

#include <atomic>
#include <chrono>

#include "compiler/dsl/desugar.hpp"
#include "compiler/dsl/printer.hpp"
#include "compiler/spec_bridge.hpp"
#include "support/hash.hpp"

namespace flashjit {

namespace {

std::atomic<uint64_t> g_analyzed{0};

std::string text_of(const dsl::ExprPtr& e, const char* absent) { return e ? dsl::print_expr(*e) : absent; }

}  // namespace

AnalyzedSpecPtr analyze_spec(const AttentionSpec& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  auto a = std::make_shared<AnalyzedSpec>();
  a->spec = spec;
  a->dsl = to_dsl(spec);
  a->canonical = a->dsl.canonical();
  dsl::Spec unnamed = a->dsl;
  unnamed.name.clear();
  a->canonical_unnamed = unnamed.canonical();
  a->spec_hash = sha256_hex(a->canonical_unnamed).substr(0, 16);
  const auto* tensors = &a->dsl.tensors;
  if (a->dsl.mask) {
    a->mask = dsl::desugar(a->dsl.mask, tensors);
    a->kv_range = dsl::derive_kv_range(a->dsl.mask, tensors);
    a->q_range = dsl::derive_q_range(a->dsl.mask, tensors);
    a->block_map.needed = !a->kv_range.exact;
    a->block_map.per_batch = a->block_map.needed && dsl::mentions(*a->mask, dsl::Builtin::B);
    a->block_map.per_head = a->block_map.needed && (dsl::mentions(*a->mask, dsl::Builtin::H) ||
                                                    dsl::mentions(*a->mask, dsl::Builtin::HKv));
  }
  if (a->dsl.score) {
    a->score = dsl::desugar(a->dsl.score, tensors);
    if (a->dsl.score_grad) a->score_grad = dsl::desugar(a->dsl.score_grad, tensors);
  }
  a->analysis_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ++g_analyzed;
  return a;
}

uint64_t analyzed_spec_count() { return g_analyzed.load(); }

std::string AnalyzedSpec::describe() const {
  std::string s = "mask: " + text_of(mask, "none") + "\nscore: " + text_of(score, "score") +
                  "\nd score'/d score: " + text_of(score_grad, "1") + "\n";
  if (mask) {
    s += "keys per query tile: " + dsl::describe_kv_range(kv_range, &dsl.params) + "\n";
    s += "queries per key tile: " + dsl::describe_q_range(q_range, &dsl.params) + "\n";
  }
  s += "block map: ";
  if (!block_map.needed) s += "none (the closed form is exact)";
  else s += std::string("built by a pre-pass, one per ") + (block_map.per_batch ? "batch entry" : "") +
            (block_map.per_batch && block_map.per_head ? " and " : "") + (block_map.per_head ? "query head" : "") +
            (!block_map.per_batch && !block_map.per_head ? "launch" : "");
  return s + "\n";
}

}  // namespace flashjit

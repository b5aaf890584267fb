// d(score)/d(score) against central finite differences.
#include <catch2/catch.hpp>

#include <cmath>

#include "compiler/dsl/derivative.hpp"
#include "compiler/dsl/printer.hpp"
#include "helpers.hpp"

using namespace flashjit::dsl;
using namespace flashjit::dsl::test;

namespace {

ExprPtr grad_of(const ExprPtr& e, const std::string& text, std::vector<Diagnostic>& diags) {
  return differentiate(e, ExprOrigin::standalone("<test>", text), diags);
}

}  // namespace

TEST_CASE("the derivative agrees with central finite differences", "[dsl][derivative][property]") {
  const Decls d = Decls::standard();
  const char* scores[] = {
      "score",
      "score * t",
      "score / t",
      "t * tanh(score / t)",                        // softcap (Gemma 2, Grok)
      "score - val[kv] * abs(q - kv)",              // ALiBi with a per-key slope
      "score + val[kv]",                            // additive bias
      "score * score",
      "score * score * score - 2.0 * score",        // polynomials
      "0.5 * score * score + 3.0 * score + 1.0",
      "where(score > 0.0, score, 0.1 * score)",     // leaky ReLU
      "max(score, -1.0)",
      "min(score, 2.0 * score)",
      "exp(score / 4.0)",
      "exp2(score / 4.0)",
      "log(1.0 + exp(score))",                      // softplus
      "sqrt(score * score + 1.0)",
      "tanh(score) * tanh(score)",
      "score / (1.0 + abs(score))",                 // softsign
      "q > kv ? score : score * 0.5",
      "(score - t) / (score * score + 4.0)",        // quotient rule
      "abs(score - 1.0)",
      "score * exp(-score * score / 8.0)",
      "where(causal, score, score - 1000.0)",
      "max(score * t, score - 2.0) + min(score, 0.0)",
      "-score + score * h",
      "t * tanh(score / t) - val[kv] * abs(q - kv)",  // softcap + ALiBi together
  };
  std::mt19937 rng(2718);
  for (const char* text : scores) {
    ExprPtr e = compile(text, d, ExprRole::Score);
    std::vector<Diagnostic> diags;
    ExprPtr g = grad_of(e, text, diags);
    INFO(text << "  d/dscore = " << (g ? print_expr(*g) : "<none>") << "\n" << format_all(diags));
    REQUIRE(g);
    REQUIRE(g->type == Type::F32);
    // The printed derivative is valid source in the same scope and reads back as itself.
    ExprPtr reread = compile(print_expr(*g), d, ExprRole::Score);
    REQUIRE(print_expr(*reread) == print_expr(*g));
    int used = 0;
    for (int i = 0; i < 200; ++i) {
      World w = random_world(d, rng, 40);
      w.params[2] = Value::of_f32(static_cast<float>(rand_int(rng, 5, 60)) / 2.0f);  // t > 0: a softcap
      const int32_t q = rand_int(rng, 0, w.seq_q - 1), kv = rand_int(rng, 0, w.seq_kv - 1);
      const float s = static_cast<float>(rand_int(rng, -4000, 4000)) / 500.0f;
      const float step = std::ldexp(1.0f, -7) * std::max(1.0f, std::fabs(s));
      auto f = [&](float x) { return static_cast<double>(eval_score(*e, w.env(q, kv, x))); };
      const double fm = f(s - step), f0 = f(s), fp = f(s + step);
      const double left = (f0 - fm) / step, right = (fp - f0) / step, central = (fp - fm) / (2 * step);
      // A switch point (where, min, max, abs) between s - h and s + h: one-sided slopes differ.
      if (std::fabs(left - right) > 0.1 * std::max({1.0, std::fabs(left), std::fabs(right)})) continue;
      const double got = eval_score(*g, w.env(q, kv, s));
      INFO("score=" << s << " q=" << q << " kv=" << kv << " t=" << w.params[2].f << " fd=" << central << " got=" << got);
      REQUIRE(std::fabs(got - central) <= 2e-2 * std::max({1.0, std::fabs(got), std::fabs(central)}));
      ++used;
    }
    CHECK(used >= 150);  // switch points are rare; the comparison must really have run
  }
}

TEST_CASE("derivatives are simplified and printed canonically", "[dsl][derivative]") {
  const Decls d = Decls::standard();
  auto grad = [&](const char* text) {
    std::vector<Diagnostic> diags;
    ExprPtr g = grad_of(compile(text, d, ExprRole::Score), text, diags);
    REQUIRE(g);
    return print_expr(*g);
  };
  CHECK(grad("score") == "1.0");
  CHECK(grad("score * t") == "t");
  CHECK(grad("score + val[kv] * 3.0") == "1.0");
  CHECK(grad("exp(score)") == "exp(score)");
  CHECK(grad("-score") == "-1.0");
  CHECK(grad("val[kv]") == "0.0");  // a score that ignores score: no gradient flows
}

TEST_CASE("non-differentiable uses of score are errors with a position", "[dsl][derivative]") {
  const Decls d = Decls::standard();
  struct Case {
    const char* text;
    int col;
    const char* says;
  } cases[] = {
      {"floor(score)", 1, "floor() of score is not differentiable"},
      {"2.0 * floor(score / 2.0)", 7, "floor() of score"},
      {"score % 2.0", 7, "'%' is not differentiable in score"},
      {"t % score", 3, "'%' is not differentiable"},
      {"where(score > 0.0, 1.0, 0.0)", 1, "step function of score"},
      {"score > t ? 1.0 : -1.0", 11, "step function of score"},
  };
  for (const auto& c : cases) {
    std::vector<Diagnostic> diags;
    ExprPtr g = grad_of(compile(c.text, d, ExprRole::Score), c.text, diags);
    INFO(c.text);
    CHECK_FALSE(g);
    REQUIRE(diags.size() == 1);
    CHECK(diags[0].line == 1);
    CHECK(diags[0].col == c.col);
    CHECK_THAT(diags[0].message, Catch::Contains(c.says));
  }
  // floor of something that does not depend on score is fine.
  std::vector<Diagnostic> diags;
  CHECK(grad_of(compile("score * floor(t)", d, ExprRole::Score), "score * floor(t)", diags));
}

// The reference semantics: i32 wrap, truncating division, division by zero, promotion.
#include <catch2/catch.hpp>

#include <cmath>

#include "compiler/dsl/desugar.hpp"
#include "compiler/dsl/interpreter.hpp"
#include "helpers.hpp"

using namespace flashjit::dsl;
using namespace flashjit::dsl::test;

namespace {
Value ev(const std::string& text, int32_t q = 0, int32_t kv = 0) {
  const Decls d = Decls::standard();
  ExprPtr e = compile(text, d, ExprRole::Score);
  Env env;
  env.q = q;
  env.kv = kv;
  std::vector<Value> params = {Value::of_i32(-7), Value::of_i32(16), Value::of_f32(1.5f), Value::of_i32(8)};
  env.params = params;
  return eval(*e, env);
}
}  // namespace

TEST_CASE("i32 arithmetic wraps and truncates toward zero", "[dsl][interpreter]") {
  CHECK(ev("2147483647 + 1").i == INT32_MIN);
  CHECK(ev("-2147483648 - 1").i == INT32_MAX);
  CHECK(ev("65536 * 65536").i == 0);
  CHECK(ev("-(-2147483648)").i == INT32_MIN);
  CHECK(ev("abs(-2147483648)").i == INT32_MIN);
  CHECK(ev("-7 / 2").i == -3);
  CHECK(ev("7 / -2").i == -3);
  CHECK(ev("-7 % 2").i == -1);
  CHECK(ev("7 % -2").i == 1);
  CHECK(ev("lo / 2").i == -3);  // lo = -7
}

TEST_CASE("division by zero is defined: x / 0 == 0, x % 0 == x", "[dsl][interpreter]") {
  for (int32_t x : {-9, -1, 0, 1, 13, INT32_MAX, INT32_MIN}) {
    INFO(x);
    CHECK(ev("q / (kv - kv)", x, 5).i == 0);
    CHECK(ev("q % (kv - kv)", x, 5).i == x);
    CHECK(ev("q / kv * kv + q % kv", x, 0).i == x);  // the identity holds at zero too
  }
  CHECK(ev("q / -1", INT32_MIN).i == INT32_MIN);
  CHECK(ev("q % -1", INT32_MIN).i == 0);
}

TEST_CASE("mixed arithmetic promotes i32 to f32 and f32 follows IEEE", "[dsl][interpreter]") {
  Value v = ev("q / 2.0", 7);
  CHECK(v.type == Type::F32);
  CHECK(v.f == 3.5f);
  CHECK(ev("16777217 + 0.0").f == 16777216.0f);  // rounds like a C cast
  CHECK(std::isinf(ev("1.0 / (q + 0.0)", 0).f));
  CHECK(std::isnan(ev("0.0 / 0.0").f));
  CHECK(ev("min(0.0 / 0.0, 2.0)").f == 2.0f);  // fmin: NaN yields the other operand
  CHECK(ev("7.5 % 2.0").f == 1.5f);
  CHECK(ev("where(q < 2.5, 1, 0)", 2).i == 1);
  CHECK(ev("where(q < 2.5, 1, 0)", 3).i == 0);
  CHECK(ev("floor(-1.5)").f == -2.0f);
  CHECK(ev("exp(t)").f == std::exp(1.5f));
  CHECK(ev("where(q > 1, 1, 2.5)", 5).type == Type::F32);
}

TEST_CASE("shorthands evaluate like their band form", "[dsl][interpreter][property]") {
  // The interpreter implements each shorthand directly; desugar() gives the definition.
  std::mt19937 rng(31);
  const Decls d = Decls::standard();
  const char* masks[] = {"causal", "causal_br", "window(w, n)", "window(lo, 3)", "prefix(n)", "document(doc)",
                         "window(2147483647, 2147483647)", "prefix(-5) || causal_br"};
  for (const char* text : masks) {
    ExprPtr m = compile(text, d, ExprRole::Mask);
    ExprPtr band = desugar(m, &d.tensors);
    for (int i = 0; i < 200; ++i) {
      World w = random_world(d, rng, 50);
      int32_t q = rand_int(rng, 0, w.seq_q - 1), kv = rand_int(rng, 0, w.seq_kv - 1);
      INFO(text << " q=" << q << " kv=" << kv);
      REQUIRE(eval_mask(*m, w.env(q, kv)) == eval_mask(*band, w.env(q, kv)));
    }
  }
}

TEST_CASE("tensor reads outside their extent raise EvalError", "[dsl][interpreter]") {
  const Decls d = Decls::standard();
  ExprPtr e = compile("doc[q] == 0", d, ExprRole::Mask);
  std::vector<int32_t> data(4, 0);
  std::vector<TensorData> tensors = {TensorData{Type::I32, data.data(), {4}}, TensorData{Type::F32, nullptr, {0}}};
  Env env;
  env.tensors = tensors;
  env.q = 3;
  CHECK(eval_mask(*e, env));
  env.q = 4;
  CHECK_THROWS_AS(eval_mask(*e, env), EvalError);
}

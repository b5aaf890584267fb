// Lexer, parser and canonical printer: precedence, literals, round trips.
#include <catch2/catch.hpp>

#include "compiler/dsl/parser.hpp"
#include "compiler/dsl/printer.hpp"
#include "helpers.hpp"

using namespace flashjit::dsl;
using namespace flashjit::dsl::test;

namespace {
ExprPtr parse(const std::string& s) {
  std::vector<Diagnostic> diags;
  ExprPtr e = parse_expr(s, ExprOrigin::standalone("<t>", s), diags);
  INFO(s << "\n" << format_all(diags));
  REQUIRE(e);
  REQUIRE(diags.empty());
  return e;
}
std::string canon(const std::string& s) { return print_expr(*parse(s)); }
}  // namespace

TEST_CASE("the printer keeps only the parentheses precedence needs", "[dsl][parser]") {
  CHECK(canon("(a + b) * c") == "(a + b) * c");
  CHECK(canon("a + (b * c)") == "a + b * c");
  CHECK(canon("(a - b) - c") == "a - b - c");
  CHECK(canon("a - (b - c)") == "a - (b - c)");
  CHECK(canon("a / (b * c)") == "a / (b * c)");
  CHECK(canon("((q))>=(kv)&&(q-kv<w)") == "q >= kv && q - kv < w");
  CHECK(canon("a || b && c") == "a || b && c");
  CHECK(canon("(a || b) && c") == "(a || b) && c");
  CHECK(canon("!(a && b)") == "!(a && b)");
  CHECK(canon("-(a + b)") == "-(a + b)");
  CHECK(canon("- -x") == "- -x");
  CHECK(canon("c ? a : d ? e : f") == "c ? a : d ? e : f");
  CHECK(canon("(c ? a : d) ? e : f") == "(c ? a : d) ? e : f");
  CHECK(canon("c ? (x ? y : z) : f") == "c ? x ? y : z : f");
  CHECK(canon("(a == b) == c") == "a == b == c");
  CHECK(canon("a == (b == c)") == "a == (b == c)");
  CHECK(canon("window(w,0)&&prefix( n )||causal_br") == "window(w, 0) && prefix(n) || causal_br");
  CHECK(canon("document( doc )") == "document(doc)");
  CHECK(canon("slope[h]*abs(q-kv)") == "slope[h] * abs(q - kv)");
  CHECK(canon("t[b,q]") == "t[b, q]");
}

TEST_CASE("literals print so that they read back identically", "[dsl][parser]") {
  CHECK(canon("-2147483648") == "-2147483648");
  CHECK(canon("2147483647") == "2147483647");
  CHECK(canon("30.0") == "30.0");
  CHECK(canon("30.") == "30.0");
  CHECK(canon(".5") == "0.5");
  CHECK(canon("0.1") == "0.1");
  CHECK(canon("1e-5") == "1e-05");
  CHECK(canon("-(3)") == "-3");
  CHECK(canon("x - -3") == "x - -3");
  CHECK(canon("-0.0") == "-0.0");
  CHECK(parse("- 7")->kind == ExprKind::IntLit);
  CHECK(parse("1.5e3")->float_value == 1500.0f);
}

TEST_CASE("parse, print, parse is the identity on random expressions", "[dsl][parser][property]") {
  std::mt19937 rng(123);
  for (int i = 0; i < 3000; ++i) {
    std::string text = random_mask(rng, i % 2 == 0, rand_int(rng, 1, 5));
    ExprPtr a = parse(text);
    std::string printed = print_expr(*a);
    ExprPtr b = parse(printed);
    INFO(text << "\n -> " << printed);
    REQUIRE(same_expr(*a, *b));
    REQUIRE(print_expr(*b) == printed);
    REQUIRE(printed.size() <= text.size());  // canonical text never adds parentheses
  }
}

TEST_CASE("function and shorthand names are keywords only before '('", "[dsl][parser]") {
  CHECK(parse("q - kv < window")->args[1]->kind == ExprKind::Param);
  CHECK(parse("window(1, 2)")->kind == ExprKind::Shorthand);
  CHECK(parse("exp + 1")->args[0]->kind == ExprKind::Param);
  CHECK(parse("causal")->kind == ExprKind::Shorthand);
  CHECK(parse("prefix[q]")->kind == ExprKind::TensorRead);
}

TEST_CASE("over-long and over-deep expressions are refused, not recursed into", "[dsl][parser]") {
  std::string deep(200, '(');
  deep += "q" + std::string(200, ')');
  std::vector<Diagnostic> diags;
  CHECK_FALSE(parse_expr(deep, ExprOrigin::standalone("<t>", deep), diags));
  REQUIRE(diags.size() == 1);
  CHECK_THAT(diags[0].message, Catch::Contains("nested too deeply"));
  std::string longx = "q";
  for (int i = 0; i < 2000; ++i) longx += " + q";
  diags.clear();
  CHECK_FALSE(parse_expr(longx, ExprOrigin::standalone("<t>", longx), diags));
  REQUIRE(diags.size() == 1);
  CHECK_THAT(diags[0].message, Catch::Contains("too long"));
}

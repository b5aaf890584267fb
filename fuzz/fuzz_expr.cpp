// libFuzzer target: the expression front end and every analysis behind it. Beyond "no
// crash, no sanitizer report", it checks the properties the tests rely on: canonical
// printing round-trips, and classification agrees with brute force on a small tile.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "compiler/dsl/classify.hpp"
#include "compiler/dsl/derivative.hpp"
#include "compiler/dsl/interpreter.hpp"
#include "compiler/dsl/kv_range.hpp"
#include "compiler/dsl/parser.hpp"
#include "compiler/dsl/printer.hpp"
#include "compiler/dsl/typecheck.hpp"

using namespace flashjit::dsl;

namespace {

const std::vector<Param>& params() {
  static const std::vector<Param> p = {Param{"lo", Type::I32, Value::of_i32(-3)}, Param{"n", Type::I32, Value::of_i32(5)},
                                       Param{"t", Type::F32, Value::of_f32(2.5f)}, Param{"w", Type::I32, Value::of_i32(4)}};
  return p;
}
const std::vector<TensorDecl>& tensors() {
  static const std::vector<TensorDecl> t = {TensorDecl{"doc", Type::I32, {Extent::symbolic(Extent::Kind::SeqKv)}},
                                            TensorDecl{"val", Type::F32, {Extent::symbolic(Extent::Kind::SeqKv)}}};
  return t;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "property violated: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  ExprOrigin origin = ExprOrigin::standalone("<fuzz>", text);
  for (ExprRole role : {ExprRole::Mask, ExprRole::Score}) {
    std::vector<Diagnostic> diags;
    ExprPtr parsed = parse_expr(text, origin, diags);
    for (const auto& d : diags) (void)d.format();
    if (!parsed) return 0;
    Scope scope{role, &params(), &tensors()};
    ExprPtr e = check_expr(parsed, scope, origin, diags);
    for (const auto& d : diags) (void)d.format();
    if (!e) continue;
    const std::string printed = print_expr(*e);
    std::vector<Diagnostic> d2;
    ExprPtr again = parse_expr(printed, ExprOrigin::standalone("<printed>", printed), d2);
    check(again && same_expr(*again, *e) && print_expr(*again) == printed, "parse(print(e)) == e");

    // A 6x6 world: doc ids 0,0,1,1,2,2; every index the expression may read is in range
    // or raises EvalError, which is the interpreter's documented behaviour.
    const int32_t doc[6] = {0, 0, 1, 1, 2, 2};
    const float val[6] = {-1.5f, 0.0f, 2.0f, 3.5f, -0.25f, 8.0f};
    std::vector<TensorData> td = {TensorData{Type::I32, doc, {6}}, TensorData{Type::F32, val, {6}}};
    std::vector<Value> pv;
    for (const auto& p : params()) pv.push_back(p.default_value);
    Env env;
    env.seq_q = env.seq_kv = 6;
    env.params = pv;
    env.tensors = td;
    if (role == ExprRole::Score) {
      std::vector<Diagnostic> d3;
      ExprPtr g = differentiate(e, origin, d3);
      if (g) {
        try {
          env.score = 0.75f;
          (void)eval_score(*g, env);
        } catch (const EvalError&) {
        }
      }
      continue;
    }
    bool any = false, all = true, threw = false;
    for (int32_t q = 0; q < 6 && !threw; ++q)
      for (int32_t kv = 0; kv < 6; ++kv) {
        env.q = q;
        env.kv = kv;
        try {
          bool v = eval_mask(*e, env);
          any |= v;
          all &= v;
        } catch (const EvalError&) {
          threw = true;
          break;
        }
      }
    MaskInputs in;
    in.seq_q = in.seq_kv = 6;
    in.tensors = &tensors();
    for (const auto& v : pv) in.params.push_back(v);
    in.b = in.h = in.h_kv = 0;
    TileClass c = classify(e, Box{0, 6, 0, 6}, in);
    if (!threw) {
      check(c != TileClass::Empty || !any, "EMPTY tile has a visible element");
      check(c != TileClass::Full || all, "FULL tile has a masked element");
    }
    KvRange kr = derive_kv_range(e, &tensors());
    SymbolValues sv;
    sv.seq_q = sv.seq_kv = 6;
    sv.b = sv.h = sv.h_kv = 0;
    for (const auto& v : pv) sv.params.push_back(v);
    TileKvRange r = eval_kv_range(kr, 0, 6, sv);
    if (!threw && any) check(r.visit_lo < r.visit_hi, "visible keys outside the visit range");
    (void)describe_kv_range(kr, &params());
  }
  return 0;
}

// The public analyses of a spec and of one expression (flashjit.hpp: analyze, analyze_expression).
#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include "compiler/analyzed_spec.hpp"
#include "compiler/dsl/derivative.hpp"
#include "compiler/dsl/parser.hpp"
#include "compiler/dsl/printer.hpp"
#include "compiler/dsl/typecheck.hpp"
#include "compiler/spec_bridge.hpp"

namespace flashjit {

SpecAnalysis analyze(const AttentionSpec& spec) {
  AnalyzedSpecPtr a = analyze_spec(spec);
  return {a->canonical, a->describe(), a->dsl.to_json()};
}

ExpressionAnalysis analyze_expression(const std::string& expr, const std::string& kind,
                                      const std::vector<ParamDecl>& params, const std::vector<TensorDecl>& tensors) {
  using namespace dsl;
  ExpressionAnalysis out;
  out.kind = kind;
  if (out.kind.empty()) {
    std::vector<Diagnostic> ignored;
    ExprPtr probe = parse_expr(expr, ExprOrigin::standalone("<expr>", expr), ignored);
    out.kind = probe && mentions(*probe, Builtin::Score) ? "score" : "mask";
  }
  if (out.kind != "mask" && out.kind != "score")
    throw Error(ErrorKind::usage, "expression kind '" + out.kind + "' is not allowed; use mask or score");
  // The declarations alone, validated and sorted by the spec builder.
  AttentionSpec decls;
  decls.params = params;
  decls.tensors = tensors;
  const Spec d = to_dsl(decls);
  const ExprOrigin origin = ExprOrigin::standalone("<expr>", expr);
  const Scope scope{out.kind == "score" ? ExprRole::Score : ExprRole::Mask, &d.params, &d.tensors};
  std::vector<Diagnostic> diags;
  ExprPtr e = check_expr(parse_expr(expr, origin, diags), scope, origin, diags);
  ExprPtr grad;
  if (e && out.kind == "score") grad = differentiate(e, origin, diags);
  if (!diags.empty() || !e) throw Error(ErrorKind::spec, format_all(diags));
  out.canonical = print_expr(*e);
  out.type = std::string(type_name(e->type));
  if (grad) out.score_grad = print_expr(*grad);
  if (out.kind == "mask") {
    const KvRange r = derive_kv_range(e, &d.tensors);
    out.affine = r.exact;
    out.kv_range = describe_kv_range(r, &d.params);
    out.q_range = describe_q_range(derive_q_range(e, &d.tensors), &d.params);
  }
  llvm::raw_string_ostream os(out.json);
  llvm::json::OStream j(os);
  j.object([&] {
    j.attribute("expr", out.canonical);
    j.attribute("kind", out.kind);
    j.attribute("type", out.type);
    if (grad) j.attribute("score_grad", out.score_grad);
    if (out.kind == "mask") {
      j.attribute("affine", out.affine);
      j.attribute("kv_range", out.kv_range);
      j.attribute("q_range", out.q_range);
    }
  });
  os.flush();
  return out;
}

}  // namespace flashjit

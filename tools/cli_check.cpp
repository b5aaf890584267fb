// `flashjit check SPEC... | --expr EXPR`: parse and check specs or one expression, print the
// canonical form and what flashjit derives from it. Problems go to stderr as the library words
// them (file:line:col, the source line, a caret), unprefixed, so editors can jump to them.
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "support/printable.hpp"
#include "tools/cli.hpp"
#include "tools/cli_json.hpp"

namespace flashjit::cli {

namespace {

struct CheckArgs {
  std::vector<std::string> specs;
  std::string expr;
  std::string kind;  // "" → score when the expression reads `score`, else mask
  std::vector<std::string> params, tensors;
  bool json = false;
};

}  // namespace

static std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

// NAME:i32|f32[=DEFAULT]
ParamDecl parse_param(const std::string& text) {
  const size_t eq = text.find('=');
  const std::vector<std::string> parts = split(text.substr(0, eq), ':');
  if (parts.size() != 2 || parts[0].empty() || (parts[1] != "i32" && parts[1] != "f32"))
    throw Error(ErrorKind::usage, "'" + text + "': expected NAME:i32 or NAME:f32, optionally =DEFAULT");
  ParamDecl p{parts[0], parts[1] == "i32" ? ScalarType::i32 : ScalarType::f32, 0};
  if (eq == std::string::npos) return p;
  const std::string def = text.substr(eq + 1);
  char* end = nullptr;
  if (p.type == ScalarType::i32) {
    const long long v = std::strtoll(def.c_str(), &end, 10);
    if (def.empty() || *end != '\0' || v < INT32_MIN || v > INT32_MAX)
      throw Error(ErrorKind::usage, "'" + text + "': the default '" + def + "' is not an i32");
    p.default_value = double(v);
  } else {
    const double v = std::strtod(def.c_str(), &end);
    if (def.empty() || *end != '\0' || !std::isfinite(v))
      throw Error(ErrorKind::usage, "'" + text + "': the default '" + def + "' is not an f32");
    p.default_value = v;
  }
  return p;
}

// NAME:i32|f32:DIM[,DIM...], each DIM an extent or a positive size (TensorDecl in flashjit.hpp).
TensorDecl parse_tensor(const std::string& text) {
  const char* kDims = "DIM: batch, heads_q, heads_kv, seq_q, seq_kv or a positive size";
  const std::vector<std::string> parts = split(text, ':');
  if (parts.size() != 3 || parts[0].empty() || (parts[1] != "i32" && parts[1] != "f32"))
    throw Error(ErrorKind::usage, "'" + text + "': expected NAME:i32|f32:DIM[,DIM...] (" + kDims + ")");
  TensorDecl t{parts[0], parts[1] == "i32" ? ScalarType::i32 : ScalarType::f32, split(parts[2], ',')};
  for (const std::string& d : t.dims) {
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(d.c_str(), &end, 10);
    const bool size = !d.empty() && *end == '\0' && errno != ERANGE && n > 0;
    if (!size && d != "batch" && d != "heads_q" && d != "heads_kv" && d != "seq_q" && d != "seq_kv")
      throw Error(ErrorKind::usage, "'" + text + "': '" + d + "' is not a dimension (" + kDims + ")");
  }
  return t;
}

namespace {

// Prints a spec's or expression's problems as the library formats them; exit 2.
int diagnostics(const Error& e) {
  const std::string text = printable(e.what());  // the source line may hold control characters
  std::cerr << text << (text.empty() || text.back() == '\n' ? "" : "\n");
  return kUsage;
}

// --json: a spec's or expression's problems as one object on stdout, each problem {file, line,
// column, message}; exit 2.
int json_diagnostics_of(const Error& e, const std::string& key, const std::string& name, const std::string& file) {
  std::cout << JsonObject().str(key, name).boolean("valid", false)
                   .raw("errors", json_array(json_diagnostics(e.what(), file))).dump()
            << "\n";
  return kUsage;
}

int check_expr(const CheckArgs& a) {
  std::vector<ParamDecl> params;
  std::vector<TensorDecl> tensors;
  for (const std::string& p : a.params) params.push_back(parse_param(p));
  for (const std::string& t : a.tensors) tensors.push_back(parse_tensor(t));
  ExpressionAnalysis x;
  try {
    x = analyze_expression(a.expr, a.kind, params, tensors);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::spec) throw;
    return a.json ? json_diagnostics_of(e, "expr", a.expr, "<expr>") : diagnostics(e);
  }
  if (a.json) {
    std::cout << x.json << "\n";
    return kOk;
  }
  std::cout << x.canonical << "\n";
  if (!x.score_grad.empty()) std::cout << "# d/dscore: " << x.score_grad << "\n";
  if (x.kind == "mask") std::cout << "# kv range: " << x.kv_range << "\n# q range: " << x.q_range << "\n";
  return kOk;
}

// Every spec is checked; the output is its canonical YAML (documents separated by "---"), or with
// --json one JSON object per line. Exit 2 when any spec has a problem.
int check_specs(const CheckArgs& a) {
  int rc = kOk;
  bool first = true;
  for (const std::string& path : a.specs) {
    SpecAnalysis s;
    try {
      s = analyze(AttentionSpec::from_yaml(read_spec_file(path), path));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::spec) throw;
      rc = a.json ? json_diagnostics_of(e, "file", path, path) : diagnostics(e);
      continue;
    }
    if (a.json) {  // the analysis, led by the file's name and its verdict
      std::cout << "{" << json_quote("file") << ":" << json_quote(path) << ",\"valid\":true,"
                << s.json.substr(s.json.find('{') + 1) << "\n";
    } else {
      if (!first) std::cout << "---\n";
      std::cout << s.canonical;
    }
    first = false;
  }
  return rc;
}

}  // namespace

Command add_check(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("check", "parse and check specs or one expression; print the canonical form");
  sub->footer(
      "Parses and checks each SPEC (YAML) and prints its canonical form (documents separated by ---), or\n"
      "with --json one JSON object per spec and line. --expr checks one mask or score expression against\n"
      "the declared params and tensors and prints it canonically, then d/dscore for a score and the key\n"
      "and query tile ranges for a mask. Exits 0 when everything is valid, 2 otherwise; every problem is\n"
      "printed as file:line:col (<expr>:1:col for --expr) with the source line and a caret.");
  auto a = std::make_shared<CheckArgs>();
  CLI::Option* specs = sub->add_option("SPEC", a->specs, "spec files (YAML)")->type_name("");
  CLI::Option* expr =
      sub->add_option("--expr", a->expr, "one mask or score expression")->type_name("EXPR")->excludes(specs);
  sub->add_option("--kind", a->kind, "what EXPR is (default: score when it reads `score`, else mask)")
      ->type_name("mask|score")->check(one_of({"mask", "score"}))
      ->needs(expr);
  sub->add_option("--param", a->params, "a param EXPR reads (repeatable; DEFAULT 0)")
      ->type_name("NAME:TYPE[=DEFAULT]")
      ->check(parsed_by(parse_param))
      ->allow_extra_args(false)
      ->needs(expr);
  sub->add_option("--tensor", a->tensors, "a tensor EXPR reads (repeatable)")
      ->type_name("NAME:TYPE:DIM[,DIM...]")
      ->check(parsed_by(parse_tensor))
      ->allow_extra_args(false)
      ->needs(expr);
  sub->add_flag("--json", a->json, "print JSON instead of text");
  return {sub, [a, expr] {
            if (expr->count() > 0) return check_expr(*a);
            if (a->specs.empty()) throw Error(ErrorKind::usage, "missing SPEC (or --expr EXPR)");
            return check_specs(*a);
          }};
}

}  // namespace flashjit::cli

#include "compiler/dsl/check_command.hpp"

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "compiler/dsl/derivative.hpp"
#include "compiler/dsl/kv_range.hpp"
#include "compiler/dsl/parser.hpp"
#include "compiler/dsl/printer.hpp"
#include "compiler/dsl/spec_loader.hpp"
#include "compiler/dsl/spec_validate.hpp"
#include "compiler/dsl/typecheck.hpp"

namespace flashjit::dsl {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;  // DESIGN §7: usage or spec error

const char* kUsage =
    "usage: flashjit check SPEC... [--json]\n"
    "       flashjit check --expr EXPR [--kind mask|score] [--param NAME:TYPE[=DEFAULT]]...\n"
    "                      [--tensor NAME:TYPE:DIM[,DIM...]]... [--json]\n"
    "Parses and type-checks a spec (YAML) or one mask/score expression and prints its\n"
    "canonical form; exits 0 when it is valid, 2 otherwise (every error is printed).\n";

struct Options {
  std::vector<std::string> specs;
  std::optional<std::string> expr;
  std::optional<std::string> kind;
  std::vector<std::string> params, tensors;
  bool json = false;
  bool help = false;
};

std::optional<Options> parse_args(int argc, char** argv, std::ostream& err) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> std::optional<std::string> {
      if (i + 1 >= argc) {
        err << "flashjit check: " << flag << " needs a value\n" << kUsage;
        return std::nullopt;
      }
      return std::string(argv[++i]);
    };
    if (a == "--json") o.json = true;
    else if (a == "--help" || a == "-h") o.help = true;
    else if (a == "--expr") { auto v = value("--expr"); if (!v) return std::nullopt; o.expr = *v; }
    else if (a == "--kind") { auto v = value("--kind"); if (!v) return std::nullopt; o.kind = *v; }
    else if (a == "--param") { auto v = value("--param"); if (!v) return std::nullopt; o.params.push_back(*v); }
    else if (a == "--tensor") { auto v = value("--tensor"); if (!v) return std::nullopt; o.tensors.push_back(*v); }
    else if (a.size() > 1 && a[0] == '-' && a != "-") {
      err << "flashjit check: unknown option '" << a << "'\n" << kUsage;
      return std::nullopt;
    } else o.specs.push_back(a);
  }
  if (o.help) return o;
  if (o.expr && !o.specs.empty()) {
    err << "flashjit check: give either SPEC files or --expr, not both\n" << kUsage;
    return std::nullopt;
  }
  if (!o.expr && o.specs.empty()) {
    err << "flashjit check: missing SPEC (or --expr EXPR)\n" << kUsage;
    return std::nullopt;
  }
  if (o.kind && *o.kind != "mask" && *o.kind != "score") {
    err << "flashjit check: --kind must be mask or score, not '" << *o.kind << "'\n";
    return std::nullopt;
  }
  if (!o.expr && (o.kind || !o.params.empty() || !o.tensors.empty())) {
    err << "flashjit check: --kind, --param and --tensor go with --expr\n" << kUsage;
    return std::nullopt;
  }
  return o;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

// --param/--tensor build a tiny spec around the expression, so the checks are the builder's.
bool declare(const Options& o, SpecBuilder& b, std::ostream& err) {
  bool ok = true;
  for (const auto& p : o.params) {
    auto eq = p.find('=');
    auto parts = split(p.substr(0, eq), ':');
    std::string def = eq == std::string::npos ? "0" : p.substr(eq + 1);
    if (parts.size() != 2 || (parts[1] != "i32" && parts[1] != "f32")) {
      err << "flashjit check: --param '" << p << "': expected NAME:i32 or NAME:f32, optionally =DEFAULT\n";
      ok = false;
      continue;
    }
    try {
      size_t used = 0;
      if (parts[1] == "i32") {
        long long v = std::stoll(def, &used);
        if (used != def.size() || v < INT32_MIN || v > INT32_MAX) throw std::out_of_range("");
        b.param_i32(parts[0], static_cast<int32_t>(v));
      } else {
        float v = std::stof(def, &used);
        if (used != def.size()) throw std::invalid_argument("");
        b.param_f32(parts[0], v);
      }
    } catch (const std::exception&) {
      err << "flashjit check: --param '" << p << "': bad default '" << def << "'\n";
      ok = false;
    }
  }
  for (const auto& t : o.tensors) {
    auto parts = split(t, ':');
    if (parts.size() != 3 || (parts[1] != "i32" && parts[1] != "f32")) {
      err << "flashjit check: --tensor '" << t << "': expected NAME:i32|f32:DIM[,DIM...]\n";
      ok = false;
      continue;
    }
    std::vector<Extent> dims;
    for (const auto& d : split(parts[2], ',')) {
      if (auto k = extent_kind_from_name(d)) { dims.push_back(Extent::symbolic(*k)); continue; }
      try {
        size_t used = 0;
        long long n = std::stoll(d, &used);
        if (used != d.size() || n <= 0) throw std::invalid_argument("");
        dims.push_back(Extent::fixed(n));
      } catch (const std::exception&) {
        err << "flashjit check: --tensor '" << t << "': bad dim '" << d << "'\n";
        ok = false;
      }
    }
    b.tensor(parts[0], parts[1] == "i32" ? Type::I32 : Type::F32, dims);
  }
  return ok;
}

// The --json form of a checked expression: canonical text, kind, type and the analyses.
std::string expr_json(const ExprPtr& e, const std::string& kind, const ExprPtr& grad, const Spec& decls) {
  std::string text;
  llvm::raw_string_ostream os(text);  // unbuffered: `text` is complete when the object is written
  llvm::json::OStream j(os);
  j.object([&] {
    j.attribute("expr", print_expr(*e));
    j.attribute("kind", kind);
    j.attribute("type", llvm::StringRef(type_name(e->type)));
    if (grad) j.attribute("score_grad", print_expr(*grad));
    if (kind != "mask") return;
    KvRange r = derive_kv_range(e, &decls.tensors);
    j.attribute("affine", r.exact);
    j.attribute("kv_range", describe_kv_range(r, &decls.params));
  });
  return text;
}

int check_expr_command(const Options& o, std::ostream& out, std::ostream& err) {
  const std::string& text = *o.expr;
  std::string kind = o.kind.value_or("");
  if (kind.empty()) {
    std::vector<Diagnostic> ignored;
    ExprPtr probe = parse_expr(text, ExprOrigin::standalone("<expr>", text), ignored);
    kind = probe && mentions(*probe, Builtin::Score) ? "score" : "mask";
  }
  SpecBuilder b;
  if (!declare(o, b, err)) return kExitUsage;
  Spec decls;
  try {
    decls = b.head_dim(128).build();  // only to validate and sort the declarations
  } catch (const SpecError& e) {
    err << format_all(e.diagnostics());
    return kExitUsage;
  }
  ExprOrigin origin = ExprOrigin::standalone("<expr>", text);
  Scope scope{kind == "score" ? ExprRole::Score : ExprRole::Mask, &decls.params, &decls.tensors};
  std::vector<Diagnostic> diags;
  ExprPtr e = check_expr(parse_expr(text, origin, diags), scope, origin, diags);
  ExprPtr grad;
  if (e && kind == "score") grad = differentiate(e, origin, diags);
  if (!diags.empty() || !e) {
    err << format_all(diags);
    return kExitUsage;
  }
  if (o.json) {
    out << expr_json(e, kind, grad, decls) << "\n";
  } else {
    out << print_expr(*e) << "\n";
    if (grad) out << "# d/dscore: " << print_expr(*grad) << "\n";
    if (kind == "mask") out << "# kv range: " << describe_kv_range(derive_kv_range(e, &decls.tensors), &decls.params) << "\n";
  }
  return kExitOk;
}

}  // namespace

int run_check_command(int argc, char** argv, std::ostream& out, std::ostream& err) {
  auto opts = parse_args(argc, argv, err);
  if (!opts) return kExitUsage;
  if (opts->help) {
    out << kUsage;
    return kExitOk;
  }
  if (opts->expr) return check_expr_command(*opts, out, err);
  int rc = kExitOk;
  bool first = true;
  for (const auto& path : opts->specs) {
    try {
      Spec s = load_spec_file(path);
      if (opts->json) {
        out << s.to_json() << "\n";
      } else {
        if (!first) out << "---\n";
        out << s.canonical();
      }
      first = false;
    } catch (const SpecError& e) {
      err << format_all(e.diagnostics());
      rc = kExitUsage;
    }
  }
  return rc;
}

}  // namespace flashjit::dsl

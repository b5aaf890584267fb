#include "compiler/dsl/spec_validate.hpp"

#include <algorithm>
#include <cctype>

#include "compiler/dsl/derivative.hpp"
#include "compiler/dsl/desugar.hpp"
#include "compiler/dsl/parser.hpp"
#include "compiler/dsl/typecheck.hpp"

namespace flashjit::dsl {

bool check_head_dim(int64_t v, const Report& report) {
  if (v < 8) { report(std::to_string(v) + " is too small: head dims are multiples of 8 from 8 to " + std::to_string(kMaxHeadDim)); return false; }
  if (v > kMaxHeadDim) { report(std::to_string(v) + " is above the limit of " + std::to_string(kMaxHeadDim) + " (a tile row must fit in shared memory and registers)"); return false; }
  if (v % 8 != 0) {
    int64_t lo = v / 8 * 8;
    report(std::to_string(v) + " is not a multiple of 8 (16-byte rows for ldmatrix/cp.async); the nearest are " +
           std::to_string(lo) + " and " + std::to_string(lo + 8));
    return false;
  }
  return true;
}

std::optional<DType> parse_dtype(std::string_view s, const Report& report) {
  std::string l(s);
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (l == "fp16" || l == "f16" || l == "float16" || l == "half") return DType::F16;
  if (l == "bf16" || l == "bfloat16") return DType::BF16;
  if (l.rfind("fp8", 0) == 0 || l.rfind("f8", 0) == 0 || l == "e4m3" || l == "e5m2" || l.rfind("float8", 0) == 0) {
    report("'" + std::string(s) + "': fp8 is not supported yet (it comes later); use fp16 or bf16");
    return std::nullopt;
  }
  std::string hint = did_you_mean(l, {"fp16", "bf16"});
  report("unknown dtype '" + std::string(s) + "'; expected fp16 or bf16" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
  return std::nullopt;
}

bool check_spec_name(std::string_view s, const Report& report) {
  if (s.empty() || s.size() > 128) { report("must be 1 to 128 characters"); return false; }
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      report("'" + std::string(s) + "' may only use letters, digits, '_', '-' and '.' (it names cache entries and files)");
      return false;
    }
  return true;
}

bool check_decl_name(std::string_view s, const Report& report) {
  bool ok = !s.empty() && s.size() <= 64 && (std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_');
  for (char c : s) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) { report("'" + std::string(s) + "' is not a valid name (letters, digits and '_', not starting with a digit)"); return false; }
  const auto& r = reserved_words();
  if (std::find(r.begin(), r.end(), s) != r.end()) {
    report("'" + std::string(s) + "' is a reserved word of the expression language; pick another name");
    return false;
  }
  return true;
}

bool check_tensor_dims(const std::vector<Extent>& dims, const Report& report) {
  int64_t product = 1;
  for (const Extent& d : dims) {
    if (d.kind != Extent::Kind::Fixed) continue;
    if (d.size <= 0) {
      report("a fixed dim must be positive, got " + std::to_string(d.size));
      return false;
    }
    if (__builtin_mul_overflow(product, d.size, &product) || product > kMaxTensorFixedElements) {
      report("the fixed dims multiply to more than 2^31-1 (" + std::to_string(kMaxTensorFixedElements) +
             ") elements, the limit for a spec tensor");
      return false;
    }
  }
  return true;
}

const std::vector<std::string>& tune_keys() {
  static const std::vector<std::string> k = {"block_m", "block_n", "num_warps", "num_stages"};
  return k;
}

bool check_tune_value(std::string_view key, int64_t v, const Report& report) {
  if (key == "block_m" || key == "block_n") {
    if (v < 16 || v > 256 || (v & (v - 1)) != 0) {
      report(std::to_string(v) + " is not a valid tile size; use a power of two from 16 to 256 (mma tiles are 16 wide)");
      return false;
    }
    return true;
  }
  if (key == "num_warps") {
    if (v < 1 || v > 16 || (v & (v - 1)) != 0) { report(std::to_string(v) + " warps: use 1, 2, 4, 8 or 16 (at most 512 threads per CTA)"); return false; }
    return true;
  }
  if (v < 1 || v > 8) { report(std::to_string(v) + " stages: use 1 to 8 (each stage is one K/V tile in shared memory)"); return false; }
  return true;
}

void finish_spec(Spec& spec, const std::optional<ExprText>& mask, const std::optional<ExprText>& score,
                 std::vector<Diagnostic>& diags) {
  std::sort(spec.params.begin(), spec.params.end(), [](const Param& a, const Param& b) { return a.name < b.name; });
  std::sort(spec.tensors.begin(), spec.tensors.end(), [](const TensorDecl& a, const TensorDecl& b) { return a.name < b.name; });
  Scope scope{ExprRole::Mask, &spec.params, &spec.tensors};
  if (mask) {
    spec.mask = check_expr(parse_expr(mask->text, mask->origin, diags), scope, mask->origin, diags);
    // "true" means no mask; the canonical text must not tell the two apart.
    if (spec.mask && spec.mask->kind == ExprKind::BoolLit && spec.mask->bool_value) spec.mask = nullptr;
  }
  scope.role = ExprRole::Score;
  if (score) {
    spec.score = check_expr(parse_expr(score->text, score->origin, diags), scope, score->origin, diags);
    if (spec.score) {
      spec.score_grad = differentiate(spec.score, score->origin, diags);
      if (spec.score->kind == ExprKind::Var && spec.score->var == Builtin::Score) spec.score = nullptr;
    }
  }
  if (!spec.score) spec.score_grad = typed_float(1.0f);
}

}  // namespace flashjit::dsl

#include "compiler/dsl/spec.hpp"

#include <algorithm>
#include <cstdio>

#include "compiler/dsl/kv_range.hpp"
#include "compiler/dsl/printer.hpp"
#include "compiler/dsl/spec_validate.hpp"

namespace flashjit::dsl {

std::string_view dtype_name(DType d) { return d == DType::F16 ? "fp16" : "bf16"; }

namespace {

// Double-quoted scalar, valid in both YAML and JSON.
std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') { out += '\\'; out += c; }
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", u); out += b; }
    else out += c;
  }
  return out + "\"";
}

std::string value_text(const Value& v) { return v.type == Type::F32 ? format_f32(v.f) : std::to_string(v.i); }

std::string int_list(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string dims_list(const std::vector<Extent>& dims, bool json) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    std::string n = extent_name(dims[i]);
    s += (i ? ", " : "") + (json && dims[i].kind != Extent::Kind::Fixed ? quoted(n) : n);
  }
  return s + "]";
}

}  // namespace

std::string Spec::canonical() const {
  std::string out;
  if (!name.empty()) out += "name: " + quoted(name) + "\n";
  out += "dtype: " + std::string(dtype_name(dtype)) + "\n";
  if (head_dim_qk == head_dim_v) out += "head_dim: " + std::to_string(head_dim_qk) + "\n";
  else out += "head_dim: {qk: " + std::to_string(head_dim_qk) + ", v: " + std::to_string(head_dim_v) + "}\n";
  if (mask) out += "mask: " + quoted(print_expr(*mask)) + "\n";
  if (score) out += "score: " + quoted(print_expr(*score)) + "\n";
  if (!params.empty()) {
    out += "params:\n";
    for (const auto& p : params)
      out += "  " + p.name + ": {type: " + std::string(type_name(p.type)) + ", default: " + value_text(p.default_value) + "}\n";
  }
  if (!tensors.empty()) {
    out += "tensors:\n";
    for (const auto& t : tensors)
      out += "  " + t.name + ": {type: " + std::string(type_name(t.elem)) + ", dims: " + dims_list(t.dims, false) + "}\n";
  }
  if (!tune.empty()) {
    out += "tune:\n";
    const std::vector<int>* lists[] = {&tune.block_m, &tune.block_n, &tune.num_warps, &tune.num_stages};
    for (size_t i = 0; i < 4; ++i)
      if (!lists[i]->empty()) out += "  " + tune_keys()[i] + ": " + int_list(*lists[i]) + "\n";
  }
  return out;
}

std::string Spec::to_json() const {
  std::string o = "{";
  o += "\"name\": " + quoted(name);
  o += ", \"dtype\": " + quoted(dtype_name(dtype));
  o += ", \"head_dim\": {\"qk\": " + std::to_string(head_dim_qk) + ", \"v\": " + std::to_string(head_dim_v) + "}";
  o += ", \"mask\": " + (mask ? quoted(print_expr(*mask)) : std::string("null"));
  o += ", \"score\": " + (score ? quoted(print_expr(*score)) : std::string("null"));
  o += ", \"params\": [";
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    o += std::string(i ? ", " : "") + "{\"name\": " + quoted(p.name) + ", \"type\": " + quoted(type_name(p.type)) +
         ", \"default\": " + value_text(p.default_value) + "}";
  }
  o += "], \"tensors\": [";
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    o += std::string(i ? ", " : "") + "{\"name\": " + quoted(t.name) + ", \"type\": " + quoted(type_name(t.elem)) +
         ", \"dims\": " + dims_list(t.dims, true) + "}";
  }
  o += "], \"tune\": {";
  const std::vector<int>* lists[] = {&tune.block_m, &tune.block_n, &tune.num_warps, &tune.num_stages};
  bool first = true;
  for (size_t i = 0; i < 4; ++i) {
    if (lists[i]->empty()) continue;
    o += std::string(first ? "" : ", ") + quoted(tune_keys()[i]) + ": " + int_list(*lists[i]);
    first = false;
  }
  o += "}, \"analysis\": {";
  o += "\"score_grad\": " + (score_grad ? quoted(print_expr(*score_grad)) : std::string("null"));
  if (mask) {
    KvRange r = derive_kv_range(mask, &tensors);
    o += ", \"mask_affine\": " + std::string(r.exact ? "true" : "false");
    o += ", \"mask_reads_tensors\": " + std::string(reads_tensor(*mask) ? "true" : "false");
    o += ", \"kv_range\": " + quoted(describe_kv_range(r, &params));
  }
  o += "}, \"canonical\": " + quoted(canonical()) + "}";
  return o;
}

int Spec::param_slot(std::string_view n) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == n) return static_cast<int>(i);
  return -1;
}
int Spec::tensor_slot(std::string_view n) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == n) return static_cast<int>(i);
  return -1;
}
std::vector<Value> Spec::default_params() const {
  std::vector<Value> v;
  for (const auto& p : params) v.push_back(p.default_value);
  return v;
}

// ---- SpecBuilder ---------------------------------------------------------------------------

SpecBuilder& SpecBuilder::name(std::string n) { name_ = std::move(n); return *this; }
SpecBuilder& SpecBuilder::dtype(DType d) { dtype_ = d; return *this; }
SpecBuilder& SpecBuilder::head_dim(int d) { return head_dim(d, d); }
SpecBuilder& SpecBuilder::head_dim(int qk, int v) { qk_ = qk; v_ = v; have_head_dim_ = true; return *this; }
SpecBuilder& SpecBuilder::mask(std::string e) { mask_ = std::move(e); have_mask_ = true; return *this; }
SpecBuilder& SpecBuilder::score(std::string e) { score_ = std::move(e); have_score_ = true; return *this; }
SpecBuilder& SpecBuilder::param_i32(std::string n, int32_t d) {
  params_.push_back(Param{std::move(n), Type::I32, Value::of_i32(d)});
  return *this;
}
SpecBuilder& SpecBuilder::param_f32(std::string n, float d) {
  params_.push_back(Param{std::move(n), Type::F32, Value::of_f32(d)});
  return *this;
}
SpecBuilder& SpecBuilder::tensor(std::string n, Type elem, std::vector<Extent> dims) {
  tensors_.push_back(TensorDecl{std::move(n), elem, std::move(dims)});
  return *this;
}
SpecBuilder& SpecBuilder::tune(Tune t) { tune_ = std::move(t); return *this; }

Spec SpecBuilder::build() const {
  std::vector<Diagnostic> diags;
  auto at = [&](std::string key) {
    return [&diags, key](const std::string& msg) {
      Diagnostic d;
      d.file = "<SpecBuilder>";
      d.message = key + ": " + msg;
      diags.push_back(std::move(d));
    };
  };
  Spec s;
  if (!name_.empty() && check_spec_name(name_, at("name"))) s.name = name_;
  s.dtype = dtype_;
  if (!have_head_dim_) {
    at("head_dim")("missing; set it with head_dim(d) or head_dim(qk, v)");
  } else {
    if (check_head_dim(qk_, at("head_dim.qk"))) s.head_dim_qk = qk_;
    if (check_head_dim(v_, at("head_dim.v"))) s.head_dim_v = v_;
  }
  std::vector<std::string> seen;
  auto unique = [&](const std::string& n, const std::string& key) {
    if (std::find(seen.begin(), seen.end(), n) != seen.end()) {
      at(key)("'" + n + "' is declared twice (params and tensors share one namespace)");
      return false;
    }
    seen.push_back(n);
    return true;
  };
  for (const auto& p : params_) {
    std::string key = "params." + p.name;
    if (!check_decl_name(p.name, at(key)) || !unique(p.name, key)) continue;
    if (p.type == Type::Bool) { at(key + ".type")("must be i32 or f32"); continue; }
    s.params.push_back(p);
  }
  for (const auto& t : tensors_) {
    std::string key = "tensors." + t.name;
    if (!check_decl_name(t.name, at(key)) || !unique(t.name, key)) continue;
    bool ok = true;
    if (t.elem == Type::Bool) { at(key + ".type")("must be i32 or f32"); ok = false; }
    if (t.dims.empty()) { at(key + ".dims")("needs at least one dim"); ok = false; }
    for (const auto& d : t.dims)
      if (d.kind == Extent::Kind::Fixed && d.size <= 0) { at(key + ".dims")("a fixed dim must be positive, got " + std::to_string(d.size)); ok = false; }
    if (ok) s.tensors.push_back(t);
  }
  auto tune_list = [&](const std::vector<int>& in, std::vector<int>& out, const std::string& key) {
    for (int v : in)
      if (check_tune_value(key, v, at("tune." + key))) out.push_back(v);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  };
  tune_list(tune_.block_m, s.tune.block_m, "block_m");
  tune_list(tune_.block_n, s.tune.block_n, "block_n");
  tune_list(tune_.num_warps, s.tune.num_warps, "num_warps");
  tune_list(tune_.num_stages, s.tune.num_stages, "num_stages");
  std::optional<ExprText> mask, score;
  if (have_mask_) mask = ExprText{mask_, ExprOrigin::standalone("<mask>", mask_)};
  if (have_score_) score = ExprText{score_, ExprOrigin::standalone("<score>", score_)};
  finish_spec(s, mask, score, diags);
  if (!diags.empty()) throw SpecError(std::move(diags));
  return s;
}

}  // namespace flashjit::dsl

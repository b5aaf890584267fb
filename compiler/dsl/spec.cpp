#include "compiler/dsl/spec.hpp"

#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "compiler/dsl/kv_range.hpp"
#include "compiler/dsl/printer.hpp"
#include "compiler/dsl/spec_validate.hpp"

namespace flashjit::dsl {

std::string_view dtype_name(DType d) { return d == DType::F16 ? "fp16" : "bf16"; }

namespace {

// Double-quoted YAML scalar.
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

std::string dims_list(const std::vector<Extent>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + extent_name(dims[i]);
  return s + "]";
}

// ---- JSON (llvm::json::OStream) ----

llvm::json::Value expr_json(const ExprPtr& e) { return e ? llvm::json::Value(print_expr(*e)) : nullptr; }

// An i32 default as an integer. An f32 default as the double that its canonical (shortest) text
// denotes, so that JSON readers get the number the spec wrote (0.1, not 0.10000000149011612);
// null when not finite, which JSON cannot represent.
llvm::json::Value default_json(const Value& v) {
  if (v.type != Type::F32) return v.i;
  if (!std::isfinite(v.f)) return nullptr;
  const std::string text = format_f32(v.f);
  double d = 0;
  std::from_chars(text.data(), text.data() + text.size(), d);
  return d;
}

void write_params(llvm::json::OStream& j, const std::vector<Param>& params) {
  for (const Param& p : params)
    j.object([&] {
      j.attribute("name", p.name);
      j.attribute("type", llvm::StringRef(type_name(p.type)));
      j.attribute("default", default_json(p.default_value));
    });
}

// Fixed dims as numbers, symbolic ones by name.
void write_tensors(llvm::json::OStream& j, const std::vector<TensorDecl>& tensors) {
  for (const TensorDecl& t : tensors)
    j.object([&] {
      j.attribute("name", t.name);
      j.attribute("type", llvm::StringRef(type_name(t.elem)));
      j.attributeArray("dims", [&] {
        for (const Extent& d : t.dims) {
          if (d.kind == Extent::Kind::Fixed) j.value(d.size);
          else j.value(extent_name(d));
        }
      });
    });
}

void write_tune(llvm::json::OStream& j, const Tune& tune) {
  const std::vector<int>* lists[] = {&tune.block_m, &tune.block_n, &tune.num_warps, &tune.num_stages};
  for (size_t i = 0; i < 4; ++i)
    if (!lists[i]->empty())
      j.attributeArray(tune_keys()[i], [&] {
        for (int v : *lists[i]) j.value(v);
      });
}

void write_analysis(llvm::json::OStream& j, const Spec& s) {
  j.attribute("score_grad", expr_json(s.score_grad));
  if (!s.mask) return;
  KvRange r = derive_kv_range(s.mask, &s.tensors);
  j.attribute("mask_affine", r.exact);
  j.attribute("mask_reads_tensors", reads_tensor(*s.mask));
  j.attribute("kv_range", describe_kv_range(r, &s.params));
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
      out += "  " + t.name + ": {type: " + std::string(type_name(t.elem)) + ", dims: " + dims_list(t.dims) + "}\n";
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
  std::string text;
  llvm::raw_string_ostream os(text);  // unbuffered: `text` is complete when the object is written
  llvm::json::OStream j(os);
  j.object([&] {
    j.attribute("name", name);
    j.attribute("dtype", llvm::StringRef(dtype_name(dtype)));
    j.attributeObject("head_dim", [&] {
      j.attribute("qk", head_dim_qk);
      j.attribute("v", head_dim_v);
    });
    j.attribute("mask", expr_json(mask));
    j.attribute("score", expr_json(score));
    j.attributeArray("params", [&] { write_params(j, params); });
    j.attributeArray("tensors", [&] { write_tensors(j, tensors); });
    j.attributeObject("tune", [&] { write_tune(j, tune); });
    j.attributeObject("analysis", [&] { write_analysis(j, *this); });
    j.attribute("canonical", canonical());
  });
  return text;
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
    if (!check_tensor_dims(t.dims, at(key + ".dims"))) ok = false;
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

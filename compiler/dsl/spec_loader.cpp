#include "compiler/dsl/spec_loader.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "compiler/dsl/spec_validate.hpp"
#include "compiler/dsl/yaml_documents.hpp"

namespace flashjit::dsl {

namespace {

// Deeper flow nesting than any spec needs; refusing it early keeps yaml-cpp's recursive
// parser well away from the end of the stack (the fuzzer runs it under ASan).
constexpr int kMaxFlowDepth = 32;

class Loader {
 public:
  Loader(std::string_view text, std::string_view file)
      : src_(std::make_shared<SourceText>(std::string(file), std::string(text))) {}

  Spec load() {
    const std::string& text = src_->text();
    if (text.size() > kMaxSpecBytes) {
      diags_.push_back(src_->at(0, 1, "spec is " + std::to_string(text.size()) + " bytes; the limit is " + std::to_string(kMaxSpecBytes)));
      throw SpecError(diags_);
    }
    if (size_t at = too_deep(text); at != std::string::npos) {
      diags_.push_back(src_->at(at, 1, "brackets nested more than " + std::to_string(kMaxFlowDepth) + " deep"));
      throw SpecError(diags_);
    }
    YAML::Node root;
    try {
      root = YAML::Load(text);
      if (std::optional<SecondDocument> second = find_second_document(text)) {
        diags_.push_back(src_->at(second->offset, second->at_marker ? 3 : 1,
                                  second->at_marker
                                      ? "a second YAML document starts here; a spec file holds one document (put "
                                        "each spec in its own file)"
                                      : "invalid YAML: the parser reads a second document from here (a stray "
                                        "character?); a spec file holds one document"));
        throw SpecError(diags_);
      }
    } catch (const YAML::Exception& e) {
      size_t pos = e.mark.is_null() ? 0 : static_cast<size_t>(std::max(0, e.mark.pos));
      diags_.push_back(src_->at(pos, 1, "invalid YAML: " + e.msg));
      throw SpecError(diags_);
    }
    try {
      walk(root);
    } catch (const YAML::Exception& e) {  // defensive: conversions are all checked first
      diags_.push_back(src_->at(0, 1, std::string("internal: unexpected YAML error: ") + e.what()));
    }
    if (!diags_.empty()) throw SpecError(diags_);
    return std::move(spec_);
  }

 private:
  static size_t too_deep(const std::string& t) {
    int depth = 0;
    char quote = 0;
    bool comment = false;
    for (size_t i = 0; i < t.size(); ++i) {
      char c = t[i];
      if (c == '\n') { comment = false; continue; }
      if (comment) continue;
      if (quote) { if (c == quote) quote = 0; else if (c == '\\' && quote == '"') ++i; continue; }
      if (c == '"' || c == '\'') quote = c;
      else if (c == '#') comment = true;
      else if (c == '[' || c == '{') { if (++depth > kMaxFlowDepth) return i; }
      else if (c == ']' || c == '}') depth = std::max(0, depth - 1);
    }
    return std::string::npos;
  }

  size_t pos_of(const YAML::Node& n) const {
    const YAML::Mark m = n.Mark();
    if (m.is_null() || m.pos < 0) return 0;
    return static_cast<size_t>(m.pos);
  }
  size_t width_of(const YAML::Node& n) const {
    if (!n.IsScalar()) return 1;
    size_t p = pos_of(n);
    const std::string& t = src_->text();
    bool quoted = p < t.size() && (t[p] == '"' || t[p] == '\'');
    return std::max<size_t>(1, n.Scalar().size() + (quoted ? 2 : 0));
  }
  void error(const YAML::Node& at, const std::string& path, const std::string& msg) {
    diags_.push_back(src_->at(pos_of(at), width_of(at), (path.empty() ? "" : path + ": ") + msg));
  }
  Report reporter(const YAML::Node& at, const std::string& path) {
    return [this, at, path](const std::string& msg) { error(at, path, msg); };
  }

  static std::string kind_name(const YAML::Node& n) {
    switch (n.Type()) {
      case YAML::NodeType::Map: return "a mapping";
      case YAML::NodeType::Sequence: return "a list";
      case YAML::NodeType::Null: return "nothing";
      default: return "'" + n.Scalar() + "'";
    }
  }

  // Iterates a mapping, reporting non-scalar and duplicate keys; calls f(key, key_node, value).
  template <typename F>
  void each(const YAML::Node& map, const std::string& path, F f) {
    std::map<std::string, size_t> seen;
    for (const auto& entry : map) {
      const YAML::Node k = entry.first;  // copies: the iterator hands out temporaries
      if (!k.IsScalar()) {
        error(k, path, "keys must be plain names");
        continue;
      }
      std::string key = k.Scalar();
      if (auto s = seen.find(key); s != seen.end()) {
        error(k, path, "duplicate key '" + key + "' (first given on line " + std::to_string(src_->at(s->second, 1, "").line) + ")");
        continue;
      }
      seen[key] = pos_of(k);
      f(key, k, YAML::Node(entry.second));
    }
  }

  void unknown_key(const YAML::Node& k, const std::string& path, const std::string& key, const std::vector<std::string>& known) {
    std::string hint = did_you_mean(key, known);
    std::string list;
    for (const auto& s : known) list += (list.empty() ? "" : ", ") + s;
    error(k, path, "unknown key '" + key + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?") + " (known keys: " + list + ")");
  }

  std::optional<std::string> scalar(const YAML::Node& n, const std::string& path, const char* what) {
    if (!n.IsScalar()) {
      error(n, path, std::string("expected ") + what + ", got " + kind_name(n));
      return std::nullopt;
    }
    return n.Scalar();
  }

  std::optional<int64_t> integer(const YAML::Node& n, const std::string& path) {
    auto s = scalar(n, path, "an integer");
    if (!s) return std::nullopt;
    const std::string& t = *s;
    int64_t v = 0;
    const char* b = t.data();
    if (!t.empty() && t[0] == '+') ++b;
    auto r = std::from_chars(b, t.data() + t.size(), v);
    if (t.empty() || r.ec != std::errc() || r.ptr != t.data() + t.size()) {
      error(n, path, "expected an integer, got '" + t + "'");
      return std::nullopt;
    }
    return v;
  }

  std::optional<float> real(const YAML::Node& n, const std::string& path) {
    auto s = scalar(n, path, "a number");
    if (!s) return std::nullopt;
    const std::string& t = *s;
    float v = 0;
    const char* b = t.data();
    if (!t.empty() && t[0] == '+') ++b;
    auto r = std::from_chars(b, t.data() + t.size(), v, std::chars_format::general);
    if (t.empty() || r.ec == std::errc::invalid_argument || r.ptr != t.data() + t.size() || std::isnan(v)) {
      error(n, path, "expected a number, got '" + t + "'");
      return std::nullopt;
    }
    if (r.ec == std::errc::result_out_of_range || std::isinf(v)) {
      error(n, path, "'" + t + "' is out of the range of f32");
      return std::nullopt;
    }
    return v;
  }

  // raw_offsets for an expression scalar: walk the YAML source from the scalar's mark and
  // match the decoded characters in order, skipping quotes, escapes and line folds. When
  // the text does not line up (escapes that change characters), every column maps to the
  // scalar's start: still the right line.
  ExprOrigin origin_of(const YAML::Node& n, const std::string& path) {
    ExprOrigin o;
    o.source = src_;
    o.key_path = path;
    const std::string& t = src_->text();
    const std::string& v = n.Scalar();
    size_t start = pos_of(n), r = start;
    if (r < t.size() && (t[r] == '|' || t[r] == '>')) {
      r = t.find('\n', r);
      r = r == std::string::npos ? t.size() : r + 1;
    } else if (r < t.size() && (t[r] == '"' || t[r] == '\'')) {
      ++r;
    }
    bool ok = true;
    for (char c : v) {
      while (r < t.size() && t[r] != c && !(c == ' ' && t[r] == '\n') &&
             (t[r] == ' ' || t[r] == '\t' || t[r] == '\n' || t[r] == '\r' || t[r] == '\\' || t[r] == '"' || t[r] == '\''))
        ++r;
      if (r >= t.size() || (t[r] != c && !(c == ' ' && t[r] == '\n'))) { ok = false; break; }
      o.raw_offsets.push_back(static_cast<uint32_t>(r));
      ++r;
    }
    if (!ok || v.empty()) o.raw_offsets.assign(std::max<size_t>(v.size(), 1), static_cast<uint32_t>(start));
    return o;
  }

  void walk(const YAML::Node& root) {
    if (!root.IsDefined() || root.IsNull()) {
      diags_.push_back(src_->at(0, 1, "empty spec: expected a mapping with at least 'dtype' and 'head_dim'"));
      return;
    }
    if (!root.IsMap()) {
      error(root, "", "a spec is a mapping of keys (dtype, head_dim, mask, ...), not " + kind_name(root));
      return;
    }
    static const std::vector<std::string> known = {"name", "dtype", "head_dim", "mask", "score", "params", "tensors", "tune"};
    bool have_dtype = false, have_head_dim = false;
    std::optional<ExprText> mask, score;
    std::optional<YAML::Node> params_node, tensors_node;
    each(root, "", [&](const std::string& key, const YAML::Node& k, const YAML::Node& v) {
      if (key == "name") {
        if (auto s = scalar(v, key, "a string"); s && check_spec_name(*s, reporter(v, key))) spec_.name = *s;
      } else if (key == "dtype") {
        have_dtype = true;
        if (auto s = scalar(v, key, "fp16 or bf16"))
          if (auto d = parse_dtype(*s, reporter(v, key))) spec_.dtype = *d;
      } else if (key == "head_dim") {
        have_head_dim = true;
        head_dim(v);
      } else if (key == "mask" || key == "score") {
        if (v.IsNull() || (v.IsScalar() && v.Scalar() == "none" && v.Tag() == "?")) return;  // explicit default
        if (!v.IsScalar()) {
          error(v, key, "expected an expression string, got " + kind_name(v));
          return;
        }
        ExprText e{v.Scalar(), origin_of(v, key)};
        (key == "mask" ? mask : score) = std::move(e);
      } else if (key == "params") {
        params_node = v;
      } else if (key == "tensors") {
        tensors_node = v;
      } else if (key == "tune") {
        tune(v);
      } else {
        unknown_key(k, "", key, known);
      }
    });
    if (!have_dtype) diags_.push_back(src_->at(pos_of(root), 1, "missing required key 'dtype' (fp16 or bf16)"));
    if (!have_head_dim) diags_.push_back(src_->at(pos_of(root), 1, "missing required key 'head_dim' (e.g. 128, or {qk: 192, v: 128})"));
    std::map<std::string, std::string> declared;  // name → "param"/"tensor"
    if (params_node) params(*params_node, declared);
    if (tensors_node) tensors(*tensors_node, declared);
    // Expressions are checked only against declarations that were themselves valid, so a
    // broken param gives one error, not one per use.
    finish_spec(spec_, mask, score, diags_);
  }

  void head_dim(const YAML::Node& v) {
    if (v.IsScalar()) {
      if (auto d = integer(v, "head_dim"); d && check_head_dim(*d, reporter(v, "head_dim")))
        spec_.head_dim_qk = spec_.head_dim_v = static_cast<int>(*d);
      return;
    }
    if (!v.IsMap()) {
      error(v, "head_dim", "expected a number or {qk: N, v: M}, got " + kind_name(v));
      return;
    }
    bool qk = false, vv = false;
    each(v, "head_dim", [&](const std::string& key, const YAML::Node& k, const YAML::Node& x) {
      if (key != "qk" && key != "v") return unknown_key(k, "head_dim", key, {"qk", "v"});
      std::string path = "head_dim." + key;
      auto d = integer(x, path);
      if (!d || !check_head_dim(*d, reporter(x, path))) return;
      (key == "qk" ? spec_.head_dim_qk : spec_.head_dim_v) = static_cast<int>(*d);
      (key == "qk" ? qk : vv) = true;
    });
    if (!qk) error(v, "head_dim", "missing 'qk' (the head dim of Q and K)");
    if (!vv) error(v, "head_dim", "missing 'v' (the head dim of V and the output)");
  }

  std::optional<Type> elem_type(const YAML::Node& v, const std::string& path) {
    auto s = scalar(v, path, "i32 or f32");
    if (!s) return std::nullopt;
    if (*s == "i32") return Type::I32;
    if (*s == "f32") return Type::F32;
    std::string hint = *s == "int" || *s == "int32" || *s == "integer" ? "i32"
                       : *s == "float" || *s == "float32" || *s == "fp32" ? "f32"
                                                                          : did_you_mean(*s, {"i32", "f32"});
    error(v, path, "unknown type '" + *s + "'; expected i32 or f32" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
    return std::nullopt;
  }

  bool declare(std::map<std::string, std::string>& declared, const std::string& name, const char* kind, const YAML::Node& k,
               const std::string& path) {
    if (!check_decl_name(name, reporter(k, path))) return false;
    if (auto it = declared.find(name); it != declared.end()) {
      error(k, path, "'" + name + "' is already declared as a " + it->second + " (params and tensors share one namespace)");
      return false;
    }
    declared[name] = kind;
    return true;
  }

  void params(const YAML::Node& node, std::map<std::string, std::string>& declared) {
    if (node.IsNull()) return;
    if (!node.IsMap()) return error(node, "params", "expected a mapping of name: {type: i32|f32, default: value}, got " + kind_name(node));
    each(node, "params", [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
      std::string path = "params." + name;
      if (!declare(declared, name, "param", k, path)) return;
      if (!v.IsMap()) return error(v, path, "expected {type: i32|f32, default: value}, got " + kind_name(v));
      std::optional<Type> type;
      std::optional<YAML::Node> def;
      bool have_type = false;
      each(v, path, [&](const std::string& key, const YAML::Node& kk, const YAML::Node& x) {
        if (key == "type") { have_type = true; type = elem_type(x, path + ".type"); }
        else if (key == "default") def = x;
        else unknown_key(kk, path, key, {"type", "default"});
      });
      if (!have_type) return error(k, path, "missing 'type' (i32 or f32)");
      if (!type) return;
      Param p{name, *type, *type == Type::I32 ? Value::of_i32(0) : Value::of_f32(0.0f)};
      if (def) {
        if (*type == Type::I32) {
          auto d = integer(*def, path + ".default");
          if (!d) return;
          if (*d < INT32_MIN || *d > INT32_MAX) return error(*def, path + ".default", std::to_string(*d) + " does not fit in i32");
          p.default_value = Value::of_i32(static_cast<int32_t>(*d));
        } else {
          auto d = real(*def, path + ".default");
          if (!d) return;
          p.default_value = Value::of_f32(*d);
        }
      }
      spec_.params.push_back(std::move(p));
    });
  }

  void tensors(const YAML::Node& node, std::map<std::string, std::string>& declared) {
    if (node.IsNull()) return;
    if (!node.IsMap()) return error(node, "tensors", "expected a mapping of name: {type: i32|f32, dims: [...]}, got " + kind_name(node));
    each(node, "tensors", [&](const std::string& name, const YAML::Node& k, const YAML::Node& v) {
      std::string path = "tensors." + name;
      if (!declare(declared, name, "tensor", k, path)) return;
      if (!v.IsMap()) return error(v, path, "expected {type: i32|f32, dims: [...]}, got " + kind_name(v));
      TensorDecl t;
      t.name = name;
      bool ok = true, have_type = false, have_dims = false;
      each(v, path, [&](const std::string& key, const YAML::Node& kk, const YAML::Node& x) {
        if (key == "type") {
          have_type = true;
          auto ty = elem_type(x, path + ".type");
          if (ty) t.elem = *ty; else ok = false;
        } else if (key == "dims") {
          have_dims = true;
          ok = dims(x, path + ".dims", t.dims) && ok;
        } else {
          unknown_key(kk, path, key, {"type", "dims"});
          ok = false;
        }
      });
      if (!have_type) { error(k, path, "missing 'type' (i32 or f32)"); ok = false; }
      if (!have_dims) { error(k, path, "missing 'dims' (e.g. [seq_kv] or [heads_q])"); ok = false; }
      if (ok) spec_.tensors.push_back(std::move(t));
    });
  }

  bool dims(const YAML::Node& x, const std::string& path, std::vector<Extent>& out) {
    if (!x.IsSequence() || x.size() == 0) {
      error(x, path, "expected a non-empty list of extents (batch, heads_q, heads_kv, seq_q, seq_kv or a positive integer), got " + kind_name(x));
      return false;
    }
    if (x.size() > 4) {
      error(x, path, std::to_string(x.size()) + " dims; tensors have at most 4");
      return false;
    }
    bool ok = true;
    for (size_t i = 0; i < x.size(); ++i) {
      const YAML::Node& d = x[i];
      std::string p = path + "[" + std::to_string(i) + "]";
      auto s = scalar(d, p, "an extent");
      if (!s) { ok = false; continue; }
      if (auto k = extent_kind_from_name(*s)) { out.push_back(Extent::symbolic(*k)); continue; }
      if (!s->empty() && (std::isdigit(static_cast<unsigned char>((*s)[0])) || (*s)[0] == '-')) {
        auto n = integer(d, p);
        if (!n) { ok = false; continue; }
        if (*n <= 0 || *n > INT32_MAX) { error(d, p, "a fixed extent must be from 1 to 2^31-1, got " + *s); ok = false; continue; }
        out.push_back(Extent::fixed(*n));
        continue;
      }
      std::string hint = did_you_mean(*s, extent_names());
      error(d, p, "unknown extent '" + *s + "'; expected batch, heads_q, heads_kv, seq_q, seq_kv or an integer" +
                      (hint.empty() ? "" : " (did you mean '" + hint + "'?)"));
      ok = false;
    }
    return ok && check_tensor_dims(out, [&](const std::string& m) { error(x, path, m); });
  }

  void tune(const YAML::Node& node) {
    if (node.IsNull()) return;
    if (!node.IsMap()) return error(node, "tune", "expected a mapping such as {block_m: [64, 128]}, got " + kind_name(node));
    each(node, "tune", [&](const std::string& key, const YAML::Node& k, const YAML::Node& v) {
      const auto& keys = tune_keys();
      auto it = std::find(keys.begin(), keys.end(), key);
      if (it == keys.end()) return unknown_key(k, "tune", key, keys);
      std::vector<int>* lists[] = {&spec_.tune.block_m, &spec_.tune.block_n, &spec_.tune.num_warps, &spec_.tune.num_stages};
      std::vector<int>& out = *lists[it - keys.begin()];
      std::string path = "tune." + key;
      std::vector<YAML::Node> items;
      if (v.IsScalar()) items.push_back(v);
      else if (v.IsSequence() && v.size() > 0) for (size_t i = 0; i < v.size(); ++i) items.push_back(v[i]);
      else return error(v, path, "expected a non-empty list of integers, got " + kind_name(v));
      for (size_t i = 0; i < items.size(); ++i) {
        std::string p = v.IsSequence() ? path + "[" + std::to_string(i) + "]" : path;
        auto n = integer(items[i], p);
        if (n && check_tune_value(key, *n, reporter(items[i], p))) out.push_back(static_cast<int>(*n));
      }
      std::sort(out.begin(), out.end());
      out.erase(std::unique(out.begin(), out.end()), out.end());
    });
  }

  std::shared_ptr<const SourceText> src_;
  std::vector<Diagnostic> diags_;
  Spec spec_;
};

}  // namespace

Spec load_spec(std::string_view yaml_text, std::string_view filename) { return Loader(yaml_text, filename).load(); }

Spec load_spec_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    Diagnostic d;
    d.file = path;
    d.message = std::string("cannot read the spec: ") + std::strerror(errno);
    throw SpecError({d});
  }
  // One byte past the limit is enough for load_spec to reject the text: /dev/zero stops there.
  std::string text(kMaxSpecBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return load_spec(text, path);
}

}  // namespace flashjit::dsl

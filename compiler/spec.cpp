// AttentionSpec: the YAML subset of issue 2 (dtype, head_dim, mask none|causal), validation and
// canonical text. The full DSL (compiler/dsl) replaces the parser; the checks here stay the limits.
#include <yaml-cpp/yaml.h>

#include <sstream>

#include "flashjit/flashjit.hpp"

namespace flashjit {

namespace {

std::string where(std::string_view file, const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  return std::string(file) + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1) + ": ";
}

int read_dim(std::string_view file, const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar()) throw Error(ErrorKind::spec, where(file, node) + key + " must be an integer");
  try {
    return node.as<int>();
  } catch (const YAML::Exception&) {
    throw Error(ErrorKind::spec, where(file, node) + key + " must be an integer, got '" + node.Scalar() + "'");
  }
}

}  // namespace

AttentionSpec AttentionSpec::from_yaml(std::string_view text, std::string_view file) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    throw Error(ErrorKind::spec, std::string(file) + ":" + std::to_string(e.mark.line + 1) + ":" +
                                     std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg);
  }
  if (!root.IsMap()) throw Error(ErrorKind::spec, std::string(file) + ":1:1: a spec must be a YAML mapping (key: value)");
  AttentionSpec spec;
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& value = kv.second;
    if (key == "name") {
      spec.name = value.as<std::string>("");
    } else if (key == "dtype") {
      std::string d = value.IsScalar() ? value.Scalar() : "";
      if (d == "fp16") spec.dtype = DType::f16;
      else if (d == "bf16") spec.dtype = DType::bf16;
      else throw Error(ErrorKind::spec, where(file, value) + "dtype '" + d + "' is not supported; allowed: fp16, bf16");
    } else if (key == "head_dim") {
      if (value.IsMap()) {
        if (!value["qk"] || !value["v"]) throw Error(ErrorKind::spec, where(file, value) + "head_dim as a mapping needs both 'qk' and 'v'");
        spec.head_dim_qk = read_dim(file, value["qk"], "head_dim.qk");
        spec.head_dim_v = read_dim(file, value["v"], "head_dim.v");
      } else {
        spec.head_dim_qk = spec.head_dim_v = read_dim(file, value, "head_dim");
      }
    } else if (key == "mask") {
      spec.mask = value.IsScalar() ? value.Scalar() : "";
      if (spec.mask != "none" && spec.mask != "causal")
        throw Error(ErrorKind::spec, where(file, value) + "mask '" + spec.mask +
                                         "' is not supported yet; allowed: none, causal (the expression DSL comes with issue 3)");
    } else {
      throw Error(ErrorKind::spec, where(file, kv.first) + "unknown key '" + key + "'; allowed keys: name, dtype, head_dim, mask");
    }
  }
  try {
    spec.validate();
  } catch (const Error& e) {
    throw Error(e.kind(), std::string(file) + ": " + e.what());
  }
  return spec;
}

void AttentionSpec::validate() const {
  auto check_dim = [](int d, const char* what) {
    if (d < 8 || d > 256 || d % 8 != 0)
      throw Error(ErrorKind::spec, std::string(what) + " " + std::to_string(d) +
                                       " is not supported; allowed: a multiple of 8 from 8 to 256 "
                                       "(rows are moved in 16-byte vectors of 8 elements)");
  };
  check_dim(head_dim_qk, "head_dim.qk");
  check_dim(head_dim_v, "head_dim.v");
  if (mask != "none" && mask != "causal")
    throw Error(ErrorKind::spec, "mask '" + mask + "' is not supported yet; allowed: none, causal");
}

std::string AttentionSpec::canonical() const {
  std::ostringstream s;
  if (!name.empty()) s << "name: " << name << "\n";
  s << "dtype: " << (dtype == DType::f16 ? "fp16" : "bf16") << "\n";
  if (head_dim_qk == head_dim_v) s << "head_dim: " << head_dim_qk << "\n";
  else s << "head_dim: {qk: " << head_dim_qk << ", v: " << head_dim_v << "}\n";
  s << "mask: " << mask << "\n";
  return s.str();
}

AttentionSpec default_spec() {
  AttentionSpec s;
  s.name = "default";
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = 128;
  s.mask = "causal";
  return s;
}

std::string TileConfig::str() const {
  return "bm" + std::to_string(block_m) + "_bn" + std::to_string(block_n) + "_w" + std::to_string(num_warps) +
         "_s" + std::to_string(num_stages);
}

Tensor bshd(void* data, int64_t seq, int64_t heads, int64_t dim) {
  Tensor t;
  t.data = data;
  t.stride[3] = 1;
  t.stride[2] = dim;
  t.stride[1] = heads * dim;
  t.stride[0] = seq * heads * dim;
  return t;
}

}  // namespace flashjit

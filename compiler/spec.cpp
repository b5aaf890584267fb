// AttentionSpec, the public face of a spec: parsing, validation and canonical text all go
// through the DSL front end (compiler/dsl), so YAML and C++-built specs can never disagree.
#include <cerrno>
#include <cmath>

#include "compiler/dsl/printer.hpp"
#include "compiler/dsl/spec_loader.hpp"
#include "compiler/spec_bridge.hpp"

namespace flashjit {

namespace {

dsl::Type scalar(ScalarType t) { return t == ScalarType::i32 ? dsl::Type::I32 : dsl::Type::F32; }

dsl::Extent extent(const std::string& dim, const std::string& tensor) {
  if (auto kind = dsl::extent_kind_from_name(dim)) return dsl::Extent::symbolic(*kind);
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(dim.c_str(), &end, 10);
  if (dim.empty() || *end != '\0' || errno == ERANGE || n <= 0)
    throw Error(ErrorKind::spec, "tensor '" + tensor + "': dimension '" + dim +
                                     "' is not allowed; use batch, heads_q, heads_kv, seq_q, seq_kv or a positive integer");
  return dsl::Extent::fixed(n);
}

}  // namespace

dsl::Spec to_dsl(const AttentionSpec& s) {
  dsl::SpecBuilder b;
  if (!s.name.empty()) b.name(s.name);
  b.dtype(s.dtype == DType::f16 ? dsl::DType::F16 : dsl::DType::BF16);
  b.head_dim(s.head_dim_qk, s.head_dim_v);
  if (!s.mask.empty() && s.mask != "none") b.mask(s.mask);
  if (!s.score.empty() && s.score != "score") b.score(s.score);
  for (const ParamDecl& p : s.params) {
    if (p.type == ScalarType::i32) {
      if (p.default_value != std::floor(p.default_value) || std::abs(p.default_value) > 2147483647.0)
        throw Error(ErrorKind::spec, "param '" + p.name + "': default " + std::to_string(p.default_value) +
                                         " is not an i32 value");
      b.param_i32(p.name, static_cast<int32_t>(p.default_value));
    } else {
      b.param_f32(p.name, static_cast<float>(p.default_value));
    }
  }
  for (const TensorDecl& t : s.tensors) {
    std::vector<dsl::Extent> dims;
    for (const std::string& d : t.dims) dims.push_back(extent(d, t.name));
    b.tensor(t.name, scalar(t.type), dims);
  }
  dsl::Tune tune;
  tune.block_m = s.tune.block_m;
  tune.block_n = s.tune.block_n;
  tune.num_warps = s.tune.num_warps;
  tune.num_stages = s.tune.num_stages;
  b.tune(tune);
  try {
    return b.build();
  } catch (const dsl::SpecError& e) {
    throw Error(ErrorKind::spec, e.what());
  }
}

AttentionSpec from_dsl(const dsl::Spec& d) {
  AttentionSpec s;
  s.name = d.name;
  s.dtype = d.dtype == dsl::DType::F16 ? DType::f16 : DType::bf16;
  s.head_dim_qk = d.head_dim_qk;
  s.head_dim_v = d.head_dim_v;
  s.mask = d.mask ? dsl::print_expr(*d.mask) : "none";
  s.score = d.score ? dsl::print_expr(*d.score) : "score";
  for (const dsl::Param& p : d.params)
    s.params.push_back({p.name, p.type == dsl::Type::I32 ? ScalarType::i32 : ScalarType::f32,
                        p.type == dsl::Type::I32 ? double(p.default_value.i) : double(p.default_value.f)});
  for (const dsl::TensorDecl& t : d.tensors) {
    TensorDecl out{t.name, t.elem == dsl::Type::I32 ? ScalarType::i32 : ScalarType::f32, {}};
    for (const dsl::Extent& e : t.dims) out.dims.push_back(dsl::extent_name(e));
    s.tensors.push_back(out);
  }
  s.tune = {d.tune.block_m, d.tune.block_n, d.tune.num_warps, d.tune.num_stages};
  return s;
}

AttentionSpec AttentionSpec::from_yaml(std::string_view text, std::string_view file) {
  try {
    return from_dsl(dsl::load_spec(text, file));
  } catch (const dsl::SpecError& e) {
    throw Error(ErrorKind::spec, e.what());
  }
}

void AttentionSpec::validate() const { to_dsl(*this); }

std::string AttentionSpec::canonical() const { return to_dsl(*this).canonical(); }

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

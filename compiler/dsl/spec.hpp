// Spec: the validated, internal description of one attention variant.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/dsl/ast.hpp"
#include "compiler/dsl/decl.hpp"
#include "compiler/dsl/diagnostic.hpp"

namespace flashjit::dsl {

enum class DType : uint8_t { F16, BF16 };  // accumulation is always fp32
std::string_view dtype_name(DType d);       // "fp16", "bf16" (the YAML spelling)

// Optional narrowing of the autotune space; empty lists mean "the tuner's default".
struct Tune {
  std::vector<int> block_m, block_n, num_warps, num_stages;  // sorted, unique
  bool empty() const { return block_m.empty() && block_n.empty() && num_warps.empty() && num_stages.empty(); }
};

inline constexpr int kMaxHeadDim = 256;

struct Spec {
  std::string name;                    // optional, for logs and cache listings
  DType dtype = DType::BF16;
  int head_dim_qk = 0, head_dim_v = 0;  // multiples of 8 in [8, 256]
  ExprPtr mask;                         // checked bool expression; nullptr = no mask
  ExprPtr score;                        // checked score expression; nullptr = identity
  ExprPtr score_grad;                   // d(score)/d(score), f32; 1.0 for the identity
  std::vector<Param> params;            // sorted by name; expression slots index this
  std::vector<TensorDecl> tensors;      // sorted by name; expression slots index this

  Tune tune;

  // The canonical YAML document: keys in a fixed order (name, dtype, head_dim, mask,
  // score, params, tensors, tune), params/tensors sorted by name, expressions printed
  // canonically, absent optional keys omitted. load_spec(canonical()) gives the same
  // Spec back and the same text again; caches hash this text.
  std::string canonical() const;
  // The same content as JSON plus the analyses (score gradient, mask kv-range form).
  std::string to_json() const;

  int param_slot(std::string_view name) const;   // -1 if absent
  int tensor_slot(std::string_view name) const;  // -1 if absent
  // Param defaults by slot, the shape the analyses and the interpreter take.
  std::vector<Value> default_params() const;
};

// Builds a Spec in C++ with the same validation and canonical text as the YAML loader.
// Errors are reported by build(), all at once (file "<SpecBuilder>", or "<mask>"/"<score>"
// with a column for expression errors).
class SpecBuilder {
 public:
  SpecBuilder& name(std::string n);
  SpecBuilder& dtype(DType d);
  SpecBuilder& head_dim(int d);
  SpecBuilder& head_dim(int qk, int v);
  SpecBuilder& mask(std::string expr);
  SpecBuilder& score(std::string expr);
  SpecBuilder& param_i32(std::string name, int32_t default_value = 0);
  SpecBuilder& param_f32(std::string name, float default_value = 0.0f);
  SpecBuilder& tensor(std::string name, Type elem, std::vector<Extent> dims);
  SpecBuilder& tune(Tune t);

  Spec build() const;  // throws SpecError

 private:
  std::string name_;
  DType dtype_ = DType::BF16;
  int qk_ = 0, v_ = 0;
  bool have_head_dim_ = false;
  std::string mask_, score_;
  bool have_mask_ = false, have_score_ = false;
  std::vector<Param> params_;
  std::vector<TensorDecl> tensors_;
  Tune tune_;
};

}  // namespace flashjit::dsl

// Field checks shared by the YAML loader and SpecBuilder, so both accept and reject alike.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/dsl/spec.hpp"

namespace flashjit::dsl {

// Receives one message about the field being checked; the caller knows where it is.
using Report = std::function<void(const std::string& message)>;

bool check_head_dim(int64_t v, const Report& report);
std::optional<DType> parse_dtype(std::string_view s, const Report& report);
bool check_spec_name(std::string_view s, const Report& report);
// Param and tensor names: identifiers that are not reserved words.
bool check_decl_name(std::string_view s, const Report& report);
// A spec tensor is a side input (a per-head slope, a per-position id): its fixed dims must be
// positive and multiply to at most kMaxTensorFixedElements (2^31-1 elements, 8 GiB of f32); the
// launch checks the product of all its dims again at the sizes given.
inline constexpr int64_t kMaxTensorFixedElements = 2147483647;
bool check_tensor_dims(const std::vector<Extent>& dims, const Report& report);
// key is one of block_m, block_n, num_warps, num_stages.
bool check_tune_value(std::string_view key, int64_t v, const Report& report);
const std::vector<std::string>& tune_keys();

// An expression with its origin (for diagnostics).
struct ExprText {
  std::string text;
  ExprOrigin origin;
};

// Final step of both front ends (which have already rejected duplicate names): sorts
// params and tensors by name, compiles mask and score against them and differentiates the
// score. Diagnostics are appended.
void finish_spec(Spec& spec, const std::optional<ExprText>& mask, const std::optional<ExprText>& score,
                 std::vector<Diagnostic>& diags);

}  // namespace flashjit::dsl

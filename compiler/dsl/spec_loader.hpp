// Reads a YAML spec into a validated Spec, reporting every error with its key path.
#pragma once

#include <string>
#include <string_view>

#include "compiler/dsl/spec.hpp"
#include "support/file_read.hpp"

namespace flashjit::dsl {

// Keys: name, dtype, head_dim (number or {qk, v}), mask, score, params, tensors, tune.
// Throws SpecError carrying every problem found (unknown keys with a did-you-mean, bad
// values, expression errors mapped to their line and column inside the YAML file).
// yaml-cpp's exceptions never escape.
Spec load_spec(std::string_view yaml_text, std::string_view filename);

// Reads the file (SpecError if it cannot be read) and calls load_spec.
Spec load_spec_file(const std::string& path);

// One limit for every way a spec arrives (text, file, CLI): support/file_read.hpp.
using flashjit::kMaxSpecBytes;

}  // namespace flashjit::dsl

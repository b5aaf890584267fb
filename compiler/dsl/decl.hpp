// Declarations a spec makes for its expressions: runtime params and device tensors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/dsl/value.hpp"

namespace flashjit::dsl {

// A runtime scalar passed at launch (changing it never recompiles). The default has the
// param's type: an i32 param's default is an exact integer.
struct Param {
  std::string name;
  Type type = Type::I32;  // I32 or F32
  Value default_value;
};

// One dimension of a tensor: a launch-time extent or a fixed size.
struct Extent {
  enum class Kind : uint8_t { Batch, HeadsQ, HeadsKv, SeqQ, SeqKv, Fixed };
  Kind kind = Kind::Fixed;
  int64_t size = 0;  // Fixed only

  static Extent fixed(int64_t n) { return Extent{Kind::Fixed, n}; }
  static Extent symbolic(Kind k) { return Extent{k, 0}; }
  bool operator==(const Extent&) const = default;
};

std::string extent_name(const Extent& e);  // "seq_kv" or "16"

// The launch sizes a symbolic extent names; an extent's size at one launch.
struct LaunchSizes {
  int64_t batch = 0, heads_q = 0, heads_kv = 0, seq_q = 0, seq_kv = 0;
};
int64_t extent_size(const Extent& e, const LaunchSizes& sizes);
std::optional<Extent::Kind> extent_kind_from_name(std::string_view s);
const std::vector<std::string>& extent_names();

// A device tensor read inside expressions as name[i0, i1, ...]; row-major, contiguous.
struct TensorDecl {
  std::string name;
  Type elem = Type::I32;  // I32 or F32
  std::vector<Extent> dims;
};

}  // namespace flashjit::dsl

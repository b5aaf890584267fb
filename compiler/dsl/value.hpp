// Scalar types and values of the expression language (i32, f32, bool).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flashjit::dsl {

enum class Type : uint8_t { I32, F32, Bool };

std::string_view type_name(Type t);

// A value of the expression language. Kept as a tagged struct (not std::variant) so that
// interpreter hot loops stay branch-predictable and the layout is trivially copyable.
struct Value {
  Type type = Type::I32;
  int32_t i = 0;
  float f = 0.0f;
  bool b = false;

  static Value of_i32(int32_t v) { Value x; x.type = Type::I32; x.i = v; return x; }
  static Value of_f32(float v) { Value x; x.type = Type::F32; x.f = v; return x; }
  static Value of_bool(bool v) { Value x; x.type = Type::Bool; x.b = v; return x; }

  // Numeric view with the language's i32 → f32 promotion; bools never convert (checked earlier).
  float as_f32() const { return type == Type::F32 ? f : static_cast<float>(i); }
  bool operator==(const Value& o) const;
};

// Shortest text that reads back to the same float and always looks like a float literal
// ("30.0", "0.1", "1e-05"), so the canonical printer round-trips.
std::string format_f32(float v);

}  // namespace flashjit::dsl

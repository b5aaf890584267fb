#include "compiler/dsl/value.hpp"

#include <charconv>
#include <cmath>

namespace flashjit::dsl {

std::string_view type_name(Type t) {
  switch (t) {
    case Type::I32: return "i32";
    case Type::F32: return "f32";
    case Type::Bool: return "bool";
  }
  return "?";
}

bool Value::operator==(const Value& o) const {
  if (type != o.type) return false;
  switch (type) {
    case Type::I32: return i == o.i;
    case Type::F32: return f == o.f || (std::isnan(f) && std::isnan(o.f));
    case Type::Bool: return b == o.b;
  }
  return false;
}

std::string format_f32(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace flashjit::dsl

// Minimal JSON text helpers for --json outputs (strings escaped per RFC 8259 §7; non-finite → null).
#pragma once

#include <string>
#include <string_view>

namespace flashjit::autotune {

std::string json_quote(std::string_view s);
std::string json_number(double v);  // shortest round-trip text; NaN/inf → null (JSON has neither)

}  // namespace flashjit::autotune

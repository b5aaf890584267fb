// The one registry of FLASHJIT_* environment variables: typed, defaulted, documented, read once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flashjit::knob {

struct Entry {
  const char* name;
  const char* type;           // "enum" | "path" | "size" | "string"
  const char* default_value;
  const char* allowed;        // for enums: "a|b|c"; otherwise ""
  const char* doc;
};

// Every knob, in the order the README lists them.
const std::vector<Entry>& registry();

// The value of a registered knob (env var or default), read once per process; an unknown name
// is an internal error. An enum value outside `allowed`, or a size that parse_size rejects, throws
// Error(usage) naming the knob.
const std::string& get(const char* name);

// A byte count: digits, optionally K, M, G or T (binary, case-insensitive) and an optional B or iB
// ("1GiB", "512M", "100B"); anything else, or a value past 2^64 - 1, is Error(usage) naming `what`.
uint64_t parse_size(std::string_view text, std::string_view what);

}  // namespace flashjit::knob

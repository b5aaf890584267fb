// The one registry of FLASHJIT_* environment variables: typed, defaulted, documented, read once.
#pragma once

#include <string>
#include <vector>

namespace flashjit::knob {

struct Entry {
  const char* name;
  const char* type;           // "enum" | "path" | "string"
  const char* default_value;
  const char* allowed;        // for enums: "a|b|c"; otherwise ""
  const char* doc;
};

// Every knob, in the order the README lists them.
const std::vector<Entry>& registry();

// The value of a registered knob (env var or default), read once per process; an unknown name
// is an internal error. An enum value outside `allowed` throws Error(usage) naming the knob.
const std::string& get(const char* name);

}  // namespace flashjit::knob

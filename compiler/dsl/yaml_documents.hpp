// How many YAML documents a spec's text holds. YAML::Load reads the first document and silently
// drops the rest, and YAML::LoadAll never returns on some inputs (",a: x": its parser keeps
// reporting another document without consuming input; found by fuzz_spec), so the loader asks
// here instead.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace flashjit::dsl {

struct SecondDocument {
  size_t offset = 0;       // where it starts in the text
  bool at_marker = false;  // after a line-start "---" or "..." (else the parser invented it)
};

// The second document of `text`, if any. Parses at most two documents. Throws YAML::Exception when
// the second one is malformed.
std::optional<SecondDocument> find_second_document(const std::string& text);

}  // namespace flashjit::dsl

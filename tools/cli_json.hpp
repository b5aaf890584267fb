// JSON for the CLI's --json output: one object per line, built field by field (the CLI sees only
// the public API, so not LLVM's JSON), and the library's error text turned into objects.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flashjit::cli {

// `s` as a JSON string literal (RFC 8259 section 7: quote, backslash and control characters escaped).
std::string json_quote(std::string_view s);

// A JSON object written in field order.
class JsonObject {
 public:
  JsonObject& str(const std::string& key, std::string_view value);
  JsonObject& num(const std::string& key, double value);  // non-finite values are written as null
  JsonObject& integer(const std::string& key, int64_t value);
  JsonObject& boolean(const std::string& key, bool value);
  JsonObject& null(const std::string& key);
  JsonObject& raw(const std::string& key, std::string json);  // an already-encoded JSON value
  std::string dump() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

std::string json_array(const std::vector<std::string>& encoded_values);

// The problems in a flashjit::Error's text (the DSL's "file:line:col: message", source line and
// caret, per problem; or "file: message" without a position) as objects
// {"file", "line", "column", "message"} (line and column 0 when there is no position). `file` is
// the name the text was produced under: lines that do not start with it continue a message.
std::vector<std::string> json_diagnostics(const std::string& error_text, const std::string& file);

}  // namespace flashjit::cli

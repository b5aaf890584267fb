// JSON text for the CLI's --json output (tools/cli_json.hpp).
#include "tools/cli_json.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace flashjit::cli {

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    // C1 controls (U+0080-U+009F, UTF-8 C2 80-C2 9F) and DEL are legal raw in JSON, but a terminal
    // acts on them (CSI, U+009B, starts an escape sequence as ESC [ does): escaped like C0.
    const unsigned char next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
    if (static_cast<unsigned char>(c) == 0xc2 && next >= 0x80 && next <= 0x9f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(next));
      out += buf;
      ++i;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;  // UTF-8 passes through
        }
    }
  }
  return out + "\"";
}

JsonObject& JsonObject::str(const std::string& key, std::string_view value) { return raw(key, json_quote(value)); }

JsonObject& JsonObject::num(const std::string& key, double value) {
  if (!std::isfinite(value)) return null(key);
  std::ostringstream s;
  s.precision(17);
  s << value;
  return raw(key, s.str());
}

JsonObject& JsonObject::integer(const std::string& key, int64_t value) { return raw(key, std::to_string(value)); }

JsonObject& JsonObject::boolean(const std::string& key, bool value) { return raw(key, value ? "true" : "false"); }

JsonObject& JsonObject::null(const std::string& key) { return raw(key, "null"); }

JsonObject& JsonObject::raw(const std::string& key, std::string json) {
  fields_.emplace_back(key, std::move(json));
  return *this;
}

std::string JsonObject::dump() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i)
    out += (i ? "," : "") + json_quote(fields_[i].first) + ":" + fields_[i].second;
  return out + "}";
}

std::string json_array(const std::vector<std::string>& encoded_values) {
  std::string out = "[";
  for (size_t i = 0; i < encoded_values.size(); ++i) out += (i ? "," : "") + encoded_values[i];
  return out + "]";
}

namespace {

struct Problem {
  int line = 0, column = 0;
  std::string message;
};

// "LINE:COL: message" → its parts; false when `rest` has no position.
bool parse_position(const std::string& rest, Problem& p) {
  char* end = nullptr;
  const long line = std::strtol(rest.c_str(), &end, 10);
  if (end == rest.c_str() || *end != ':') return false;
  const char* col_start = end + 1;
  const long col = std::strtol(col_start, &end, 10);
  if (end == col_start || end[0] != ':' || end[1] != ' ') return false;
  p.line = static_cast<int>(line), p.column = static_cast<int>(col), p.message = end + 2;
  return true;
}

}  // namespace

std::vector<std::string> json_diagnostics(const std::string& error_text, const std::string& file) {
  std::vector<Problem> problems;
  std::istringstream lines(error_text);
  const std::string prefix = file + ":";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  ", 0) == 0) continue;  // the source line and the caret under it
    if (line.rfind(prefix, 0) == 0) {
      Problem p;
      const std::string rest = line.substr(prefix.size());
      if (!parse_position(rest, p)) p.message = rest.rfind(' ', 0) == 0 ? rest.substr(1) : rest;
      problems.push_back(p);
    } else if (!problems.empty()) {
      problems.back().message += "\n" + line;
    } else if (!line.empty()) {
      problems.push_back({0, 0, line});
    }
  }
  std::vector<std::string> out;
  for (const Problem& p : problems)
    out.push_back(JsonObject().str("file", file).integer("line", p.line).integer("column", p.column)
                      .str("message", p.message).dump());
  return out;
}

}  // namespace flashjit::cli

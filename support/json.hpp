// Writing JSON with llvm::json::OStream (llvm/Support/JSON.h): compact text, strings escaped and
// checked for UTF-8 by LLVM.
#pragma once

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace flashjit {

// `v`, or null for NaN and infinities, which JSON cannot represent (RFC 8259 §6).
inline llvm::json::Value number_or_null(double v) {
  return std::isfinite(v) ? llvm::json::Value(v) : llvm::json::Value(nullptr);
}

// `json` with DEL and the C1 controls (U+0080-U+009F, UTF-8 C2 80-C2 9F) written as \u escapes.
// LLVM escapes only C0 controls; JSON allows the others raw, but a terminal acts on them (CSI,
// U+009B, starts an escape sequence as ESC [ does), and `cache list --json` prints text from files
// anyone may have edited. Outside strings valid JSON has no such bytes, so the document means the same.
inline std::string escape_c1_controls(const std::string& json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(json[i]);
    const unsigned char next = i + 1 < json.size() ? static_cast<unsigned char>(json[i + 1]) : 0;
    if (c == 0x7f || (c == 0xc2 && next >= 0x80 && next <= 0x9f)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c == 0x7f ? 0x7fu : unsigned(next));
      out += buf;
      i += c == 0x7f ? 0 : 1;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// The text of the one JSON value that `write` writes (C1 controls escaped: escape_c1_controls).
inline std::string json_document(llvm::function_ref<void(llvm::json::OStream&)> write) {
  std::string text;
  llvm::raw_string_ostream os(text);  // unbuffered: `text` is complete when `write` returns
  llvm::json::OStream json(os);
  write(json);
  return escape_c1_controls(text);
}

}  // namespace flashjit

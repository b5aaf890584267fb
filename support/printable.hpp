// Text from files (specs, cache entries, imports) on its way to a terminal: control characters
// shown escaped, so that a spec or a cache entry cannot move the cursor, clear the screen or set
// the window title (ECMA-48 escape sequences start with ESC, 0x1B, or the C1 control CSI, U+009B).
// Header-only: the CLI uses it without the library's internals.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace flashjit {

// `text` with every C0 control (except newline and tab when `keep_lines`), DEL and C1 control
// (U+0080-U+009F) written as \xNN or \u00NN, and every byte that is not part of valid UTF-8 as \xNN.
// Printable ASCII and valid UTF-8 pass unchanged.
inline std::string printable(std::string_view text, bool keep_lines = true) {
  std::string out;
  out.reserve(text.size());
  auto hex = [&out](const char* format, unsigned v) {
    char buf[8];
    std::snprintf(buf, sizeof buf, format, v);
    out += buf;
  };
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      const bool control = c < 0x20 || c == 0x7f;
      if (control && !(keep_lines && (c == '\n' || c == '\t'))) hex("\\x%02x", c);
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    // UTF-8 (RFC 3629): the lead byte gives the length; overlong forms and surrogates are invalid.
    const size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? (c <= 0xef ? 3 : 0) : c >= 0xc2 ? 2 : 0;
    bool valid = n > 0 && i + n <= text.size();
    unsigned cp = n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; valid && k < n; ++k) {
      const unsigned char b = static_cast<unsigned char>(text[i + k]);
      valid = (b & 0xc0) == 0x80;
      cp = (cp << 6) | (b & 0x3f);
    }
    valid = valid && !(n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) &&
            !(n == 4 && (cp < 0x10000 || cp > 0x10ffff));
    if (!valid) {
      hex("\\x%02x", c);
      ++i;
    } else if (cp <= 0x9f) {
      hex("\\u%04x", cp);
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace flashjit

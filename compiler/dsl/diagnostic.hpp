// Errors a person can act on: `file:line:col: message`, the source line, a caret under the token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace flashjit::dsl {

struct Diagnostic {
  std::string file;
  int line = 0;            // 1-based; 0 = no position (e.g. a C++-built spec field)
  int col = 0;             // 1-based byte column
  int length = 1;          // width of the caret underline
  std::string message;
  std::string source_line; // the whole line of source, without its newline

  // "file:line:col: message\n  source line\n  ^~~~\n" (the last two only with a position).
  std::string format() const;
};

std::string format_all(const std::vector<Diagnostic>& diags);

// Thrown by the spec loader, the builder and the expression front end. It carries every
// error found, not just the first: a user fixing a spec should see them all at once.
class SpecError : public std::runtime_error {
 public:
  explicit SpecError(std::vector<Diagnostic> diags);
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }

 private:
  std::vector<Diagnostic> diags_;
};

// A whole source text (a YAML file, or a lone expression) with a line index.
class SourceText {
 public:
  SourceText(std::string file, std::string text);
  const std::string& file() const { return file_; }
  const std::string& text() const { return text_; }
  // Byte offset → diagnostic with 1-based line/col and that line's text.
  Diagnostic at(size_t offset, size_t length, std::string message) const;

 private:
  std::string file_;
  std::string text_;
  std::vector<size_t> line_starts_;
};

// Where an expression's characters came from: for an expression taken out of a YAML scalar
// (quoted, folded, block), raw_offsets[i] is the file offset of the expression's i-th byte.
struct ExprOrigin {
  std::shared_ptr<const SourceText> source;
  std::vector<uint32_t> raw_offsets;  // empty = identity (the expression is the whole source)
  std::string key_path;               // e.g. "mask"; prefixed to messages when not empty

  static ExprOrigin standalone(std::string file, std::string expr_text);
  Diagnostic at(size_t expr_offset, size_t length, std::string message) const;
};

// The closest candidate by edit distance, or "" when nothing is close enough to be a typo.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace flashjit::dsl

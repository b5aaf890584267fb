#include "compiler/dsl/diagnostic.hpp"

#include <algorithm>

namespace flashjit::dsl {

std::string Diagnostic::format() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(col);
  out += ": " + message + "\n";
  if (line > 0) {
    out += "  " + source_line + "\n  ";
    // Tabs before the column are copied so the caret lines up in any tab width.
    for (int i = 0; i + 1 < col; ++i)
      out += (i < static_cast<int>(source_line.size()) && source_line[i] == '\t') ? '\t' : ' ';
    out += '^';
    out.append(static_cast<size_t>(std::max(0, length - 1)), '~');
    out += '\n';
  }
  return out;
}

std::string format_all(const std::vector<Diagnostic>& diags) {
  std::string out;
  for (const auto& d : diags) out += d.format();
  return out;
}

SpecError::SpecError(std::vector<Diagnostic> diags)
    : std::runtime_error(format_all(diags)), diags_(std::move(diags)) {}

SourceText::SourceText(std::string file, std::string text) : file_(std::move(file)), text_(std::move(text)) {
  line_starts_.push_back(0);
  for (size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
}

Diagnostic SourceText::at(size_t offset, size_t length, std::string message) const {
  offset = std::min(offset, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  size_t line_idx = static_cast<size_t>(it - line_starts_.begin()) - 1;
  size_t start = line_starts_[line_idx];
  size_t end = text_.find('\n', start);
  if (end == std::string::npos) end = text_.size();
  Diagnostic d;
  d.file = file_;
  d.line = static_cast<int>(line_idx) + 1;
  d.col = static_cast<int>(offset - start) + 1;
  std::string line = text_.substr(start, end - start);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  // Keep the caret on the line it points at.
  size_t max_len = end > offset ? end - offset : 1;
  d.length = static_cast<int>(std::clamp<size_t>(length, 1, std::max<size_t>(max_len, 1)));
  d.source_line = std::move(line);
  d.message = std::move(message);
  return d;
}

ExprOrigin ExprOrigin::standalone(std::string file, std::string expr_text) {
  ExprOrigin o;
  o.source = std::make_shared<SourceText>(std::move(file), std::move(expr_text));
  return o;
}

Diagnostic ExprOrigin::at(size_t expr_offset, size_t length, std::string message) const {
  if (!key_path.empty()) message = key_path + ": " + message;
  if (raw_offsets.empty()) return source->at(expr_offset, length, std::move(message));
  size_t raw = expr_offset < raw_offsets.size() ? raw_offsets[expr_offset]
                                                : (raw_offsets.back() + 1);
  // A token folded across YAML lines would underline past the line end; at() clamps it.
  return source->at(raw, length, std::move(message));
}

static size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) { best_d = d; best = c; }
  }
  // One edit per three characters is a typo; more is a different word.
  size_t limit = std::max<size_t>(1, (std::max(word.size(), best.size()) + 2) / 3);
  if (best.empty() || best_d == 0 || best_d > limit) return "";
  return best;
}

}  // namespace flashjit::dsl

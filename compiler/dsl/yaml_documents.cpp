#include "compiler/dsl/yaml_documents.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sstream>
#include <string_view>

namespace flashjit::dsl {

namespace {

// Counts documents and keeps where the second starts; the other events are not needed.
struct DocumentCounter : YAML::EventHandler {
  int documents = 0;
  YAML::Mark second = YAML::Mark::null_mark();
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents == 2) second = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

// The line-start "---" after content, or the first content after a "..." end marker (YAML 1.2,
// 9.2); npos when neither is there.
size_t marker_offset(const std::string& t) {
  bool content = false, ended = false;
  for (size_t at = 0; at < t.size();) {
    size_t end = t.find('\n', at);
    if (end == std::string::npos) end = t.size();
    const std::string_view line(t.data() + at, end - at);
    auto marker = [&](std::string_view m) {
      return line.substr(0, 3) == m && (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    };
    const size_t first = line.find_first_not_of(" \t\r");
    const bool blank = first == std::string_view::npos || line[first] == '#';
    if (marker("---")) {
      if (content || ended) return at;
      content = line.find_first_not_of(" \t\r", 3) != std::string_view::npos;
    } else if (marker("...")) {
      ended = content;
    } else if (!blank && line[0] != '%') {
      if (ended) return at;
      content = true;
    }
    at = end + 1;
  }
  return std::string::npos;
}

}  // namespace

std::optional<SecondDocument> find_second_document(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentCounter counter;
  for (int i = 0; i < 2 && parser.HandleNextDocument(counter); ++i) {
  }
  if (counter.documents < 2) return std::nullopt;
  const size_t marker = marker_offset(text);
  if (marker != std::string::npos) return SecondDocument{marker, true};
  const bool known = !counter.second.is_null() && counter.second.pos >= 0;
  return SecondDocument{known ? static_cast<size_t>(counter.second.pos) : 0, false};
}

}  // namespace flashjit::dsl

#include "compiler/dsl/decl.hpp"

namespace flashjit::dsl {

const std::vector<std::string>& extent_names() {
  static const std::vector<std::string> names = {"batch", "heads_q", "heads_kv", "seq_q", "seq_kv"};
  return names;
}

std::string extent_name(const Extent& e) {
  if (e.kind == Extent::Kind::Fixed) return std::to_string(e.size);
  return extent_names()[static_cast<size_t>(e.kind)];
}

std::optional<Extent::Kind> extent_kind_from_name(std::string_view s) {
  const auto& names = extent_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (s == names[i]) return static_cast<Extent::Kind>(i);
  return std::nullopt;
}

int64_t extent_size(const Extent& e, const LaunchSizes& s) {
  switch (e.kind) {
    case Extent::Kind::Batch: return s.batch;
    case Extent::Kind::HeadsQ: return s.heads_q;
    case Extent::Kind::HeadsKv: return s.heads_kv;
    case Extent::Kind::SeqQ: return s.seq_q;
    case Extent::Kind::SeqKv: return s.seq_kv;
    case Extent::Kind::Fixed: return e.size;
  }
  return 0;
}

}  // namespace flashjit::dsl

#include "compiler/kernel_template.hpp"

#include <map>
#include <mutex>

namespace flashjit {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, KernelTemplate, std::less<>> templates;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

bool register_template(KernelTemplate t) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const std::string name = t.name;
  r.templates.insert_or_assign(name, std::move(t));
  return true;
}

const KernelTemplate& find_template(std::string_view name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (auto it = r.templates.find(name); it != r.templates.end()) return it->second;
  std::string known;
  for (const auto& [n, t] : r.templates) known += (known.empty() ? "" : ", ") + n;
  throw Error(ErrorKind::internal, "internal error: no kernel template '" + std::string(name) +
                                       "' is registered (registered: " + (known.empty() ? "none" : known) +
                                       "; a flashjit bug)");
}

std::vector<const KernelTemplate*> registered_templates() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<const KernelTemplate*> out;
  for (const auto& [n, t] : r.templates) out.push_back(&t);
  return out;
}

}  // namespace flashjit

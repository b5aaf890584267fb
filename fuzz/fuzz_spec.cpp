// libFuzzer target: the YAML spec loader. Any input either loads or throws SpecError (never
// anything else, never a crash); what loads has a canonical text that is a fixed point.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compiler/dsl/spec_loader.hpp"

using namespace flashjit::dsl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    Spec s = load_spec(text, "fuzz.yaml");
    const std::string c = s.canonical();
    (void)s.to_json();
    Spec again = load_spec(c, "canonical.yaml");
    if (again.canonical() != c) {
      std::fprintf(stderr, "canonical text is not a fixed point:\n%s\n---\n%s\n", c.c_str(), again.canonical().c_str());
      std::abort();
    }
  } catch (const SpecError& e) {
    (void)format_all(e.diagnostics());
  }
  return 0;
}

// libFuzzer target: the tuning cache's readers (one GPU's file, and `cache import` bundles). Any
// input parses or throws flashjit::Error (never anything else, never a crash); what parses is
// emitted and parsed again, and that second emission is a fixed point.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "autotune/tuning_yaml.hpp"

using namespace flashjit::autotune;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)tuning_file_schema(text);
  try {
    const std::string once = emit_tuning_file(parse_tuning_file(text, "fuzz.yaml"));
    const std::string twice = emit_tuning_file(parse_tuning_file(once, "emitted.yaml"));
    if (emit_tuning_file(parse_tuning_file(twice, "again.yaml")) != twice) {
      std::fprintf(stderr, "tuning file emission is not a fixed point:\n%s\n", twice.c_str());
      std::abort();
    }
  } catch (const flashjit::Error&) {
  }
  try {
    const std::string once = emit_tuning_export(parse_tuning_export(text, "fuzz.yaml"));
    const std::string twice = emit_tuning_export(parse_tuning_export(once, "emitted.yaml"));
    if (emit_tuning_export(parse_tuning_export(twice, "again.yaml")) != twice) {
      std::fprintf(stderr, "tuning export emission is not a fixed point:\n%s\n", twice.c_str());
      std::abort();
    }
  } catch (const flashjit::Error&) {
  }
  return 0;
}

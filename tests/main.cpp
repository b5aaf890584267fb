// Test runner: Catch2 v2 with one rule added — when no CUDA driver or device is present, a run
// that selects only [gpu] tests exits 69, which CTest (SKIP_RETURN_CODE 69) reports as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <iostream>

#include "tests/support.hpp"

namespace flashjit::test {

bool gpu_available() {
  static const bool available = [] {
    try {
      Runtime::create(0);
      return true;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::no_gpu) throw;
      return false;
    }
  }();
  return available;
}

}  // namespace flashjit::test

int main(int argc, char** argv) {
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv)) return rc;
  const auto& data = session.configData();
  const bool listing = data.listTests || data.listTestNamesOnly || data.listTags || data.listReporters;
  if (!listing && !flashjit::test::gpu_available()) {
    const auto& config = session.config();
    auto selected = Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config);
    size_t gpu = 0;
    for (const auto& tc : selected)
      for (const auto& tag : tc.getTestCaseInfo().tags) gpu += tag == "gpu";
    if (!selected.empty() && gpu == selected.size()) {
      std::cout << "SKIPPED: no CUDA driver or device on this machine; " << gpu << " [gpu] test case(s) not run\n";
      return 69;
    }
  }
  return session.run();
}

// Test runner: Catch2 v2 with skips added — when no CUDA driver or device is present, a run that
// selects only [gpu] tests exits 69 at once; a run in which any test case called SKIP_TEST (and
// none failed) exits 69 after it, naming each skip. CTest (SKIP_RETURN_CODE 69) reports both as
// skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <iostream>
#include <mutex>
#include <vector>

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

namespace {
std::mutex skips_mu;
std::vector<std::string>& skips() {
  static std::vector<std::string> s;
  return s;
}
}  // namespace

void record_skip(const std::string& reason) {
  const std::string line = Catch::getResultCapture().getCurrentTestName() + ": " + reason;
  std::cout << "SKIPPED: " << line << std::endl;
  WARN("SKIPPED: " << reason);  // in Catch's own report (XML, JUnit) too
  std::lock_guard<std::mutex> lock(skips_mu);
  skips().push_back(line);
}

int skipped_count() {
  std::lock_guard<std::mutex> lock(skips_mu);
  return int(skips().size());
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
  const int rc = session.run();
  if (rc != 0 || flashjit::test::skipped_count() == 0) return rc;
  std::cout << "SKIPPED: " << flashjit::test::skipped_count()
            << " test case(s) did not do their work (listed above): exit 69, not a pass\n";
  return 69;
}

// Runner of the internal tests (these never need a GPU): Catch2 v2 with skips added, as the
// public tests' runner (tests/main.cpp) — a run in which a test case called SKIP_TEST (e.g. no
// ptxas) and none failed exits 69 after naming each skip, and CTest reports it as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <iostream>
#include <mutex>
#include <vector>

#include "tests/support.hpp"

namespace flashjit::test {

namespace {
std::mutex skips_mu;
std::vector<std::string> skips;
}  // namespace

void record_skip(const std::string& reason) {
  const std::string line = Catch::getResultCapture().getCurrentTestName() + ": " + reason;
  std::cout << "SKIPPED: " << line << std::endl;
  WARN("SKIPPED: " << reason);
  std::lock_guard<std::mutex> lock(skips_mu);
  skips.push_back(line);
}

int skipped_count() {
  std::lock_guard<std::mutex> lock(skips_mu);
  return int(skips.size());
}

}  // namespace flashjit::test

int main(int argc, char** argv) {
  const int rc = Catch::Session().run(argc, argv);
  if (rc != 0 || flashjit::test::skipped_count() == 0) return rc;
  std::cout << "SKIPPED: " << flashjit::test::skipped_count()
            << " test case(s) did not do their work (listed above): exit 69, not a pass\n";
  return 69;
}

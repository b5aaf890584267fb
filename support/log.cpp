#include "support/log.hpp"

#include <cstdio>
#include <mutex>

#include "support/knobs.hpp"

namespace flashjit::log {

static Level threshold() {
  static const Level level = [] {
    const std::string& v = knob::get("FLASHJIT_LOG");
    if (v == "error") return Level::error;
    if (v == "info") return Level::info;
    if (v == "debug") return Level::debug;
    return Level::warn;
  }();
  return level;
}

bool enabled(Level level) { return static_cast<int>(level) <= static_cast<int>(threshold()); }

void write(Level level, const std::string& message) {
  if (!enabled(level)) return;
  static std::mutex mu;
  static const char* names[] = {"error", "warn", "info", "debug"};
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[flashjit %s] %s\n", names[static_cast<int>(level)], message.c_str());
}

}  // namespace flashjit::log

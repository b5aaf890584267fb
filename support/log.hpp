// Leveled logging to stderr, gated by FLASHJIT_LOG.
#pragma once

#include <string>

namespace flashjit::log {

enum class Level { error = 0, warn = 1, info = 2, debug = 3 };

bool enabled(Level level);
void write(Level level, const std::string& message);

inline void info(const std::string& m) { write(Level::info, m); }
inline void debug(const std::string& m) { write(Level::debug, m); }
inline void warn(const std::string& m) { write(Level::warn, m); }

}  // namespace flashjit::log

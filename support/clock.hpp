// UTC timestamps as ISO 8601 text.
#pragma once

#include <ctime>
#include <string>

namespace flashjit {

// "2026-12-01T10:20:30Z": the extended format in whole seconds, for dates people read (tuning
// entries, `flashjit cache show`).
std::string utc_iso8601(std::time_t t);
// "20261201T102030.123456789Z": the basic format with nanoseconds, for file names: no ':', and
// names sort by time.
std::string utc_iso8601_basic_ns(const timespec& t);

}  // namespace flashjit

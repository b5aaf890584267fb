#include "support/clock.hpp"

#include <cstdio>

namespace flashjit {
namespace {

// `t` in UTC, through strftime's `format`.
std::string format_utc(std::time_t t, const char* format) {
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  return std::string(buf, std::strftime(buf, sizeof buf, format, &tm));
}

}  // namespace

std::string utc_iso8601(std::time_t t) { return format_utc(t, "%Y-%m-%dT%H:%M:%SZ"); }

std::string utc_iso8601_basic_ns(const timespec& t) {
  char ns[16];
  std::snprintf(ns, sizeof ns, ".%09ldZ", static_cast<long>(t.tv_nsec));
  return format_utc(t.tv_sec, "%Y%m%dT%H%M%S") + ns;
}

}  // namespace flashjit

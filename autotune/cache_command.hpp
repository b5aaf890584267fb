// `flashjit cache list|show|clear|export|import`: the CLI's logic, kept in the library so it is
// unit-tested without a process and the CLI file stays a thin adapter.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace flashjit::autotune {

struct CacheCommandEnv {
  std::string cache_root;        // flashjit::cache_dir()
  std::string flashjit_version;  // flashjit::versions().flashjit
  uint64_t max_bytes = uint64_t(1) << 30;  // FLASHJIT_CACHE_MAX_BYTES
};

// `args` are the words after "cache" (e.g. {"list", "--json"}). Returns the exit code: 0 ok,
// 1 failure (no such entry, unreadable import file), 2 usage error. Never throws.
FLASHJIT_API int run_cache_command(const std::vector<std::string>& args, const CacheCommandEnv& env, std::ostream& out,
                                   std::ostream& err);

}  // namespace flashjit::autotune

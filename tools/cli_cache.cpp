// Thin adapter: the cache location, version and size bound from the public API, then the logic in
// autotune/cache_command.cpp (exported from libflashjit.so).
#include "tools/cli_cache.hpp"

#include <iostream>
#include <string>
#include <vector>

#include "autotune/cache_command.hpp"
#include "autotune/compile_cache.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit::cli {

int cmd_cache(int argc, char** argv) {
  autotune::CacheCommandEnv env;
  env.cache_root = flashjit::cache_dir();
  env.flashjit_version = flashjit::versions().flashjit;
  // FLASHJIT_CACHE_MAX_BYTES as the registry read it; an unregistered knob leaves the 1 GiB default.
  for (const KnobInfo& k : flashjit::knobs())
    if (k.name == "FLASHJIT_CACHE_MAX_BYTES" && !k.value.empty()) {
      try {
        env.max_bytes = autotune::parse_byte_size(k.value, k.name);
      } catch (const Error& e) {
        std::cerr << "flashjit cache: " << e.what() << "\n";
        return 2;
      }
    }
  std::vector<std::string> args(argv + 2, argv + argc);
  return autotune::run_cache_command(args, env, std::cout, std::cerr);
}

}  // namespace flashjit::cli

// Compiled kernels through the public cache API and `flashjit cache show|list|clear`: entries are
// stored with the compile cache's own writer (a GPU-less machine compiles none through a Runtime).
#include <catch2/catch.hpp>

#include <llvm/Support/JSON.h>

#include <filesystem>

#include "autotune/compile_cache.hpp"
#include "flashjit/cache.hpp"
#include "tests/support.hpp"

using namespace flashjit;
namespace fs = std::filesystem;

namespace {

const std::string kCli = (fs::read_symlink("/proc/self/exe").parent_path() / "flashjit").string();

autotune::KernelArtifacts artifacts(const std::string& seed) {
  autotune::KernelArtifacts a;
  a.entry = "flashjit_fwd_" + seed;
  a.threads = 128;
  a.shared_bytes = 16384;
  a.registers = 96;
  a.spill_bytes = 0;
  a.created_unix = 1764000000;
  a.ptx = "// ptx for " + seed + "\n.version 8.0\n.target sm_90a\n" + std::string(5000, 'x');
  a.cubin = std::string("\0ELF", 4) + std::string(300, '\x7f');
  return a;
}

std::string key(const std::string& spec) { return "flashjit 0.1.0\narch sm_90a\ndriver 13000\nspec " + spec + "\n"; }

// Two compiled kernels in a fresh cache folder.
struct KernelCache {
  test::TempDir dir;
  KernelCache() {
    autotune::CompileCache cc(dir.path);
    REQUIRE(cc.put(key("a"), artifacts("a")));
    REQUIRE(cc.put(key("b"), artifacts("b")));
  }
};

}  // namespace

TEST_CASE("cache API: compiled kernels are counted, found by hash prefix and cleared", "[cache]") {
  KernelCache c;
  CacheListing l = list_cache(c.dir.path);
  CHECK(l.kernels.entries == 2);
  CHECK(l.kernels.dir == c.dir.path + "/kernels");
  CHECK(l.kernels.bytes > 10000);
  CHECK(l.tunings.empty());
  llvm::Expected<llvm::json::Value> list = llvm::json::parse(cache_listing_json(l));
  REQUIRE(static_cast<bool>(list));
  CHECK(list->getAsObject()->getObject("kernels")->getInteger("count") == 2);

  const std::string hash = autotune::CompileCache::hash_key(key("a"));
  CacheEntry e = find_cache_entry(hash.substr(0, 10), c.dir.path);
  REQUIRE(e.kernel);
  CHECK_FALSE(e.tuning);
  CHECK(e.kernel->hash == hash);
  CHECK(e.kernel->entry == "flashjit_fwd_a");
  CHECK(e.kernel->threads == 128);
  CHECK(e.kernel->registers == 96);
  CHECK(e.kernel->created == "2025-11-24T16:00:00Z");
  CHECK(e.kernel->cubin_bytes == 304);
  CHECK(e.kernel->key == key("a"));
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(cache_entry_json(e));
  REQUIRE(static_cast<bool>(json));
  const llvm::json::Object& o = *json->getAsObject();
  CHECK(o.getString("hash") == hash);
  CHECK(o.getString("entry") == "flashjit_fwd_a");
  CHECK(o.getInteger("shared_bytes") == 16384);
  CHECK(o.getInteger("ptx_bytes") == int64_t(e.kernel->ptx_bytes));
  CHECK(o.getString("key") == key("a"));

  CHECK_FALSE(find_cache_entry("zzzz", c.dir.path).found());
  CacheClearSummary s = clear_cache(c.dir.path);
  CHECK(s.kernels == 2);
  CHECK(list_cache(c.dir.path).kernels.entries == 0);
}

TEST_CASE("cli: cache show prints a compiled kernel by hash prefix, list counts them, clear removes them",
          "[cache][cli]") {
  KernelCache c;
  const std::string env = "FLASHJIT_CACHE_DIR='" + c.dir.path + "' ";
  const std::string hash = autotune::CompileCache::hash_key(key("a"));
  auto show = test::run_command(env + kCli + " cache show " + hash.substr(0, 10));
  INFO(show.output);
  CHECK(show.code == 0);
  CHECK_THAT(show.output, Catch::Contains("compiled kernel " + hash));
  CHECK_THAT(show.output, Catch::Contains("entry      flashjit_fwd_a"));
  CHECK_THAT(show.output, Catch::Contains("threads    128, shared 16384 B, registers 96, spills 0 B"));
  CHECK_THAT(show.output, Catch::Contains("sizes      PTX 4.9 KiB, cubin 304 B"));
  CHECK_THAT(show.output, Catch::Contains("  key\n" + key("a")));
  auto json = test::run_command(env + kCli + " cache show --json " + hash);
  CHECK(json.code == 0);
  CHECK(json.output == cache_entry_json(find_cache_entry(hash, c.dir.path)) + "\n");
  CHECK_THAT(test::run_command(env + kCli + " cache list").output, Catch::Contains("2 kernels, 10.8 KiB of 1.0 GiB"));
  auto clear = test::run_command(env + kCli + " cache clear");
  CHECK_THAT(clear.output, Catch::Contains("removed 0 tuning files and 2 compiled kernels"));
}

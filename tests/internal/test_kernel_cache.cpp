// The compile cache in the compile path: keys, hits without LLVM, bypasses, limits.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "runtime/kernel_cache.hpp"
#include "tests/support.hpp"

using namespace flashjit;
namespace fs = std::filesystem;

namespace {

AttentionSpec small_spec(const std::string& mask = "causal") {
  AttentionSpec s;
  s.name = "tune_test";
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = 64;
  s.mask = mask;
  return s;
}


PlannedKernel planned(const AttentionSpec& spec, const std::string& arch = "sm_90a",
                      std::optional<TileConfig> config = std::nullopt) {
  KernelRequest r;
  r.target.arch = arch;
  r.config = config;
  return plan_kernel(analyze_spec(spec), r);
}

StageOptions no_dumps() {
  StageOptions s;
  s.keep_llvm_ir = false;
  return s;
}

}  // namespace

TEST_CASE("kernel cache: the key names every input that changes code and ignores the spec name", "[kernel_cache]") {
  const TileConfig c{64, 64, 4, 2};
  const std::string k = rt::compile_cache_key(planned(small_spec(), "sm_90a", c).key, 13000);
  const VersionInfo v = versions();
  CHECK_THAT(k, Catch::Contains("flashjit=" + v.flashjit) && Catch::Contains("llvm=" + v.llvm) &&
                    Catch::Contains("ptx_isa=") && Catch::Contains("arch=sm_90a") && Catch::Contains("driver=13000") &&
                    Catch::Contains("config=bm64_bn64_w4_s2") && Catch::Contains("templates=attention_fwd@") &&
                    Catch::Contains("variant=wgmma"));
  AttentionSpec renamed = small_spec();
  renamed.name = "other";
  CHECK(rt::compile_cache_key(planned(renamed, "sm_90a", c).key, 13000) == k);
  CHECK(rt::compile_cache_key(planned(small_spec(), "sm_90a", c).key, 13010) != k);
  // ptxas and the driver's JIT give different cubins; the driver keeps the key it always had.
  CHECK(rt::compile_cache_key(planned(small_spec(), "sm_90a", c).key, 13000, "driver") == k);
  const std::string by_ptxas = rt::compile_cache_key(planned(small_spec(), "sm_90a", c).key, 13000, "ptxas 13.0.88");
  CHECK(by_ptxas != k);
  CHECK_THAT(by_ptxas, Catch::Contains("assembler=ptxas 13.0.88"));
  CHECK(rt::compile_cache_key(planned(small_spec(), "sm_90a", c).key, 13000, "ptxas 13.0.48") != by_ptxas);
  CHECK(rt::compile_cache_key(planned(small_spec(), "sm_80", c).key, 13000) != k);
  CHECK(rt::compile_cache_key(planned(small_spec(), "sm_90a", TileConfig{64, 64, 4, 3}).key, 13000) != k);
  CHECK(rt::compile_cache_key(planned(small_spec("none"), "sm_90a", c).key, 13000) != k);
  // The instruction choice (FLASHJIT_MMA) changes the code, hence the key.
  KernelRequest sync;
  sync.target = {"sm_90a", /*allow_wgmma=*/false};
  sync.config = c;
  CHECK(rt::compile_cache_key(plan_kernel(analyze_spec(small_spec()), sync).key, 13000) != k);
  // A tensor mask adds the block-map pre-pass's template version.
  AttentionSpec doc = small_spec("document(doc)");
  doc.tensors = {{"doc", ScalarType::i32, {"seq_kv"}}};
  CHECK_THAT(planned(doc).key.text, Catch::Contains("block_map@"));
}

TEST_CASE("kernel cache: a second compile of the same kernel is a hit that runs no LLVM", "[kernel_cache]") {
  test::TempDir root;
  rt::KernelCacheSettings s;
  s.root = root.path;
  s.driver_version = 0;  // compile-only: entries hold PTX, no cubin
  const AttentionSpec spec = small_spec();
  const rt::KernelCacheCounters c0 = rt::kernel_cache_counters();
  rt::KernelBuild first = rt::build_kernel(planned(spec), no_dumps(), s, nullptr);
  CHECK_FALSE(first.cache_hit);
  CHECK_THAT(first.cache_status, Catch::StartsWith("miss, stored"));
  CHECK(test::kernel_files(root.path) == 1);
  const rt::KernelCacheCounters c1 = rt::kernel_cache_counters();
  CHECK(c1.llvm_compiles == c0.llvm_compiles + 1);
  CHECK(c1.stores == c0.stores + 1);

  const PlannedKernel again = planned(spec);
  const auto t0 = std::chrono::steady_clock::now();
  rt::KernelBuild second = rt::build_kernel(again, no_dumps(), s, nullptr);
  const double hit_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const rt::KernelCacheCounters c2 = rt::kernel_cache_counters();
  CHECK(second.cache_hit);
  CHECK(c2.llvm_compiles == c1.llvm_compiles);  // LLVM did not run
  CHECK(c2.hits == c1.hits + 1);
  CHECK(second.compiled.ptx == first.compiled.ptx);
  CHECK(second.compiled.entry == first.compiled.entry);
  CHECK(second.compiled.key == first.compiled.key);
  CHECK(second.compiled.description == first.compiled.description);
  CHECK(second.compiled.threads == first.compiled.threads);
  CHECK(second.compiled.shared_bytes == first.compiled.shared_bytes);
  CHECK(second.compiled.config.str() == first.compiled.config.str());
  CHECK(second.compiled.config_reason == first.compiled.config_reason);
  CHECK(second.compiled.stages.empty());
  CHECK(hit_ms < 50);  // a file read, no LLVM (measured ~1 ms)

  // Another driver version is another entry; a different name is the same one.
  s.driver_version = 1;
  CHECK_FALSE(rt::build_kernel(planned(spec), no_dumps(), s, nullptr).cache_hit);
  s.driver_version = 0;
  AttentionSpec renamed = spec;
  renamed.name = "renamed";
  CHECK(rt::build_kernel(planned(renamed), no_dumps(), s, nullptr).cache_hit);
  CHECK(test::kernel_files(root.path) == 2);

  // A corrupted entry is a miss (with a warning) and is replaced.
  for (const auto& e : fs::directory_iterator(root.path + "/kernels"))
    if (e.path().filename().string().rfind(first.key_hash, 0) == 0) std::ofstream(e.path()) << "garbage";
  CHECK_FALSE(rt::build_kernel(planned(spec), no_dumps(), s, nullptr).cache_hit);
  CHECK(rt::build_kernel(planned(spec), no_dumps(), s, nullptr).cache_hit);
}

TEST_CASE("kernel cache: an override dir bypasses it and an unwritable cache is only a warning", "[kernel_cache]") {
  test::TempDir root, overrides;
  StageOptions with_override = no_dumps();
  with_override.override_dir = overrides.path;
  rt::KernelCacheSettings s;
  s.root = root.path;
  rt::KernelBuild b = rt::build_kernel(planned(small_spec()), with_override, s, nullptr);
  CHECK_THAT(b.cache_status, Catch::StartsWith("bypassed: "));
  CHECK_FALSE(b.cache_hit);
  CHECK(test::kernel_files(root.path) == 0);
  CHECK_THAT(b.compiled.ptx, Catch::Contains(".entry"));

  rt::KernelCacheSettings bad;
  bad.root = "/proc/flashjit-cannot-write-here";
  rt::KernelBuild w;
  REQUIRE_NOTHROW(w = rt::build_kernel(planned(small_spec()), no_dumps(), bad, nullptr));
  CHECK_THAT(w.compiled.ptx, Catch::Contains(".entry"));
  CHECK_FALSE(w.cache_hit);
}

TEST_CASE("kernel cache: an illegal config is an Error(spec) naming the limit, before any cache", "[kernel_cache]") {
  try {
    planned(small_spec(), "sm_90a", TileConfig{64, 64, 8, 2});
    FAIL("an illegal config was planned");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::spec);
    CHECK_THAT(e.what(), Catch::Contains("block_m must be 16"));
  }
}

// A compile-cache entry whose checksum is valid but whose cubin the driver does not load (damaged
// on disk before the checksum was taken, or a cubin this driver rejects) is a miss with a warning:
// the kernel is compiled again and the entry replaced, instead of every later compile of the kernel
// failing until `flashjit cache clear`. Needs a GPU (the driver does the loading).
#include <catch2/catch.hpp>

#include "autotune/compile_cache.hpp"
#include "runtime/kernel_cache.hpp"
#include "tests/support.hpp"

using namespace flashjit;

TEST_CASE("kernel cache: a cached cubin the driver cannot load is recompiled and replaced, with a warning",
          "[gpu][faults][kernel_cache]") {
  REQUIRE_GPU_OR_SKIP();
  test::ScopedCacheDir scoped;
  const test::TempDir& dir = scoped.dir;
  const std::shared_ptr<rt::Context> ctx = rt::open_context(0);
  AttentionSpec spec;
  spec.dtype = DType::bf16;
  spec.head_dim_qk = spec.head_dim_v = 64;
  spec.mask = "causal && q - kv < 517";  // a kernel no other test stores
  KernelRequest request;
  request.target.arch = ctx->info.arch();
  const PlannedKernel planned = plan_kernel(analyze_spec(spec), request);
  StageOptions stages;
  stages.keep_llvm_ir = false;

  rt::CompiledModule first = rt::compile_and_load(*ctx, planned, stages);  // compiled and stored
  CHECK_FALSE(first.cache_hit);
  rt::unload_module(*ctx, first.loaded);
  // The entry rewritten through the cache's own writer, so its checksum matches the damaged body.
  const autotune::CompileCache cache(dir.path, rt::compile_cache_max_bytes());
  const std::string key = rt::compile_cache_key(planned.key, ctx->info.driver_version);
  std::optional<autotune::KernelArtifacts> a = cache.get(key);
  REQUIRE(a);
  REQUIRE_FALSE(a->cubin.empty());
  a->cubin = "not a cubin";
  REQUIRE(cache.put(key, *a));

  rt::CompiledModule second = rt::compile_and_load(*ctx, planned, stages);
  CHECK_FALSE(second.cache_hit);
  CHECK_THAT(second.cache_status, Catch::Contains("the cached cubin did not load"));
  CHECK(second.loaded.function != nullptr);
  rt::unload_module(*ctx, second.loaded);
  // The entry holds a loadable cubin again: the next compile is a hit.
  rt::CompiledModule third = rt::compile_and_load(*ctx, planned, stages);
  CHECK(third.cache_hit);
  CHECK(third.loaded.function != nullptr);
  rt::unload_module(*ctx, third.loaded);
}

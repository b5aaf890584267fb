// The compile cache in the compile path, the autotuner and `flashjit tune` (issue 5).
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/kernel_cache.hpp"
#include "runtime/tuner.hpp"
#include "tests/support.hpp"

using namespace flashjit;
namespace fs = std::filesystem;

namespace {

const std::string kCli = (fs::read_symlink("/proc/self/exe").parent_path() / "flashjit").string();

AttentionSpec small_spec(const std::string& mask = "causal") {
  AttentionSpec s;
  s.name = "tune_test";
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = 64;
  s.mask = mask;
  return s;
}

size_t kernel_files(const std::string& root) {
  size_t n = 0;
  std::error_code ec;
  for (fs::directory_iterator it(root + "/kernels", ec), end; !ec && it != end; it.increment(ec))
    n += it->path().extension() == ".fjk";
  return n;
}

std::string write(const test::TempDir& d, const std::string& name, const std::string& text) {
  std::string path = d.path + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// Points this process's caches at a temp dir for one test, and back afterwards.
struct ScopedCacheRoot {
  test::TempDir dir;
  ScopedCacheRoot() { rt::set_cache_root(dir.path); }
  ~ScopedCacheRoot() { rt::set_cache_root(""); }
};

// CompileOptions fields that runtime/INTEGRATION.md adds; the tests compile before and after.
template <class O>
bool set_autotune(O& o, const char* mode, bool tune_on_first_use) {
  if constexpr (requires { o.autotune; o.tune_on_first_use; }) {
    o.autotune = mode;
    o.tune_on_first_use = tune_on_first_use;
    return true;
  }
  return false;
}

}  // namespace

TEST_CASE("tune: the compile cache key names every input that changes code and ignores the spec name", "[tune]") {
  AttentionSpec s = small_spec();
  TileConfig c;
  c.block_m = 64, c.block_n = 64, c.num_warps = 4, c.num_stages = 2;
  const std::string k = rt::compile_cache_key(s, c, "sm_90a", 13000);
  const VersionInfo v = versions();
  CHECK_THAT(k, Catch::Contains("flashjit=" + v.flashjit) && Catch::Contains("llvm=" + v.llvm) &&
                    Catch::Contains("ptx_isa=") && Catch::Contains("arch=sm_90a") && Catch::Contains("driver=13000") &&
                    Catch::Contains("config=bm64_bn64_w4_s2") && Catch::Contains("cache_format=") &&
                    Catch::Contains("template="));
  AttentionSpec renamed = s;
  renamed.name = "other";
  CHECK(rt::compile_cache_key(renamed, c, "sm_90a", 13000) == k);
  CHECK(rt::compile_cache_key(s, c, "sm_90a", 13010) != k);
  CHECK(rt::compile_cache_key(s, c, "sm_80", 13000) != k);
  TileConfig c2 = c;
  c2.num_stages = 3;
  CHECK(rt::compile_cache_key(s, c2, "sm_90a", 13000) != k);
  CHECK(rt::compile_cache_key(small_spec("none"), c, "sm_90a", 13000) != k);
}

TEST_CASE("tune: a second compile of the same kernel is a compile-cache hit that runs no LLVM", "[tune]") {
  test::TempDir root;
  CompileOptions o;
  o.arch = "sm_90a";
  rt::KernelCacheSettings s;
  s.root = root.path;
  s.driver_version = 0;  // compile-only: entries hold PTX, no cubin
  const AttentionSpec spec = small_spec();
  if (!rt::template_version_if_known()) {
    // Before runtime/INTEGRATION.md edit 1 the cache must refuse to work rather than key without it.
    rt::KernelBuild b = rt::build_kernel(spec, o, s, nullptr);
    CHECK_THAT(b.cache_status, Catch::StartsWith("bypassed: the template version is unknown"));
    CHECK(kernel_files(root.path) == 0);
    WARN("compiler/pipeline.cpp does not export template_version() yet (INTEGRATION.md edit 1): cache bypassed");
    return;
  }
  const rt::KernelCacheCounters c0 = rt::kernel_cache_counters();
  rt::KernelBuild first = rt::build_kernel(spec, o, s, nullptr);
  CHECK_FALSE(first.cache_hit);
  CHECK_THAT(first.cache_status, Catch::StartsWith("miss, stored"));
  CHECK(kernel_files(root.path) == 1);
  const rt::KernelCacheCounters c1 = rt::kernel_cache_counters();
  CHECK(c1.llvm_compiles == c0.llvm_compiles + 1);
  CHECK(c1.stores == c0.stores + 1);

  const auto t0 = std::chrono::steady_clock::now();
  rt::KernelBuild second = rt::build_kernel(spec, o, s, nullptr);
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
  CHECK(hit_ms < 50);  // a file read and a plan, no LLVM (measured ~1 ms)

  // Another driver version or tile config is another entry; a different name is the same one.
  s.driver_version = 1;
  CHECK_FALSE(rt::build_kernel(spec, o, s, nullptr).cache_hit);
  s.driver_version = 0;
  AttentionSpec renamed = spec;
  renamed.name = "renamed";
  CHECK(rt::build_kernel(renamed, o, s, nullptr).cache_hit);
  CHECK(kernel_files(root.path) == 2);

  // A corrupted entry is a miss (with a warning) and is replaced.
  for (const auto& e : fs::directory_iterator(root.path + "/kernels"))
    if (e.path().filename().string().rfind(first.key_hash, 0) == 0) std::ofstream(e.path()) << "garbage";
  rt::KernelBuild again = rt::build_kernel(spec, o, s, nullptr);
  CHECK_FALSE(again.cache_hit);
  CHECK(rt::build_kernel(spec, o, s, nullptr).cache_hit);
}

TEST_CASE("tune: an override dir bypasses the compile cache and an unwritable cache is only a warning", "[tune]") {
  test::TempDir root, overrides;
  CompileOptions o;
  o.arch = "sm_90a";
  o.override_dir = overrides.path;
  rt::KernelCacheSettings s;
  s.root = root.path;
  rt::KernelBuild b = rt::build_kernel(small_spec(), o, s, nullptr);
  CHECK_THAT(b.cache_status, Catch::StartsWith("bypassed: "));
  CHECK_FALSE(b.cache_hit);
  CHECK(kernel_files(root.path) == 0);
  CHECK_THAT(b.compiled.ptx, Catch::Contains(".entry"));

  CompileOptions plain;
  plain.arch = "sm_90a";
  rt::KernelCacheSettings bad;
  bad.root = "/proc/flashjit-cannot-write-here";
  rt::KernelBuild w;
  REQUIRE_NOTHROW(w = rt::build_kernel(small_spec(), plain, bad, nullptr));
  CHECK_THAT(w.compiled.ptx, Catch::Contains(".entry"));
  CHECK_FALSE(w.cache_hit);
}

TEST_CASE("tune: an illegal config is an Error(spec) naming the limit, cached or not", "[tune]") {
  test::TempDir root;
  CompileOptions o;
  o.arch = "sm_90a";
  o.config = TileConfig{64, 64, 8, 2};
  rt::KernelCacheSettings s;
  s.root = root.path;
  try {
    rt::build_kernel(small_spec(), o, s, nullptr);
    FAIL("an illegal config compiled");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::spec);
    CHECK_THAT(e.what(), Catch::Contains("block_m must be 16"));
  }
}

TEST_CASE("tune: search spaces hold only configs the template can build", "[tune]") {
  for (int d : {64, 128, 256}) {
    AttentionSpec s = small_spec();
    s.head_dim_qk = s.head_dim_v = d;
    autotune::SearchSpace space = rt::search_space_for(s);
    REQUIRE(space.legal);
    size_t legal = 0;
    for (int bm : space.block_m)
      for (int bn : space.block_n)
        for (int w : space.num_warps)
          for (int st : space.num_stages) {
            TileConfig c{bm, bn, w, st};
            if (!space.legal(c)) continue;
            ++legal;
            CHECK((c.block_m == 16 * c.num_warps || c.block_m == 32 * c.num_warps));
            CompileOptions o;
            o.arch = "sm_90a";
            o.config = c;
            rt::KernelCacheSettings ks;
            ks.enabled = false;
            // plan_forward's limits are the judge: the largest tiles of each space must build.
            if (bn == space.block_n.back() && st == space.num_stages.back())
              CHECK_NOTHROW(rt::build_kernel(s, o, ks, nullptr));
          }
    CHECK(legal >= 4);
  }
  AttentionSpec t = small_spec();
  t.tune.block_m = {64};
  t.tune.num_stages = {3};
  autotune::SearchSpace narrowed = rt::search_space_for(t);
  CHECK(narrowed.block_m == std::vector<int>{64});
  CHECK(narrowed.num_warps == std::vector<int>{4, 2});  // derived: block_m = 16 or 32 × num_warps
  CHECK(narrowed.num_stages == std::vector<int>{3});
}

TEST_CASE("tune: --shapes parsing and tuning keys", "[tune]") {
  auto shapes = rt::parse_tune_shapes("4x16x4096x4096,1\xC3\x97" "8\xC3\x97" "100\xC3\x97" "300");
  REQUIRE(shapes.size() == 2);
  CHECK(shapes[0].batch == 4);
  CHECK(shapes[0].heads == 16);
  CHECK(shapes[1].seq_q == 100);
  CHECK(shapes[1].seq_kv == 300);
  for (const char* bad : {"", "4x16x4096", "4x16x4096x0", "4x16xAx4096", "4x16x4096x4096x2", "4x16x4096x4096,"})
    CHECK_THROWS_AS(rt::parse_tune_shapes(bad), Error);
  AttentionSpec s = small_spec();
  autotune::TuningKey a = rt::tuning_key(s, 2, 8, 1000, 1000), b = rt::tuning_key(s, 2, 8, 1024, 600);
  CHECK(a.bucket.seq_q == 1024);
  CHECK(a.bucket.seq_q == b.bucket.seq_q);
  CHECK(a.bucket.seq_kv == b.bucket.seq_kv);
  AttentionSpec renamed = s;
  renamed.name = "x";
  CHECK(rt::tuning_spec_hash(renamed) == rt::tuning_spec_hash(s));
  CHECK(rt::tuning_spec_hash(small_spec("none")) != rt::tuning_spec_hash(s));
}

TEST_CASE("tune: the tune command checks usage and the spec before the GPU, and exits 69 without one", "[tune]") {
  test::TempDir d;
  const std::string spec = write(d, "s.yaml", "name: t\ndtype: bf16\nhead_dim: 64\nmask: causal\n");
  auto run = [](std::vector<std::string> args) {
    std::ostringstream out, err;
    int code = rt::run_tune_command(args, out, err);
    return std::make_pair(code, out.str() + err.str());
  };
  CHECK(run({"--help"}).first == 0);
  auto no_shapes = run({spec});
  CHECK(no_shapes.first == 2);
  CHECK_THAT(no_shapes.second, Catch::Contains("--shapes"));
  auto bad_shapes = run({spec, "--shapes", "4x16x4096"});
  CHECK(bad_shapes.first == 2);
  CHECK_THAT(bad_shapes.second, Catch::Contains("'4x16x4096' is not BxHxSqxSkv"));
  CHECK(run({spec, "--shapes", "1x1x64x64", "--mode", "fast"}).first == 2);
  CHECK(run({spec, "--shapes", "1x1x64x64", "--deadline", "-1"}).first == 2);
  CHECK(run({spec, "--shapes", "1x1x64x64", "--frobnicate"}).first == 2);
  auto bad_spec = run({write(d, "b.yaml", "dtype: bf16\nhead_dim: 100\n"), "--shapes", "1x1x64x64"});
  CHECK(bad_spec.first == 2);
  CHECK_THAT(bad_spec.second, Catch::Contains("100 is not a multiple of 8"));
  CHECK(run({d.path + "/missing.yaml", "--shapes", "1x1x64x64"}).first == 2);
  if (!test::gpu_available()) {
    auto r = run({spec, "--shapes", "1x2x128x128"});
    CHECK(r.first == 69);
    CHECK_THAT(r.second, Catch::Contains("nothing ran"));
  }
}

TEST_CASE("tune: `flashjit tune` exits 2 on bad --shapes and 69 without a GPU", "[tune][cli]") {
  test::TempDir d;
  const std::string spec = write(d, "s.yaml", "dtype: bf16\nhead_dim: 64\nmask: causal\n");
  auto bad = test::run_command(kCli + " tune " + spec + " --shapes 4x16");
  if (bad.output.find("unknown command 'tune'") != std::string::npos) {
    WARN("flashjit_cli has no `tune` yet (runtime/INTEGRATION.md edits 5-6 not applied)");
    return;
  }
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Catch::Contains("not BxHxSqxSkv"));
  CHECK(test::run_command(kCli + " tune --help").code == 0);
  if (!test::gpu_available()) {
    auto r = test::run_command(kCli + " tune " + spec + " --shapes 1x2x128x128");
    CHECK(r.code == 69);
  }
}

// ---- on the GPU ------------------------------------------------------------------------------------

TEST_CASE("tune: quick tuning stores an entry and a second kernel uses it without tuning", "[tune][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  ScopedCacheRoot cache;
  Runtime rt = Runtime::create(0);
  rt::TuneJob job;
  job.spec = small_spec();
  job.batch = 1, job.heads_q = job.heads_kv = 4, job.seq_q = job.seq_kv = 512;
  job.mode = autotune::TuneMode::quick;
  job.reps = 5;
  const uint64_t tunes0 = rt::tuner_counters().tunes;
  const auto t0 = std::chrono::steady_clock::now();
  rt::TuneOutcome o = rt::tune_shape(rt, job);
  const double tune_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(o.result.summary);
  REQUIRE(o.result.measured);
  CHECK(o.stored);
  CHECK(o.result.best_m.p20_ms <= o.result.best_m.median_ms);
  CHECK(o.result.best_m.median_ms <= o.result.best_m.p80_ms);
  CHECK(o.result.timed <= 8);
  CHECK(tune_s < 15);  // issue 5: quick mode ≤ 15 s per bucket (cold compile cache included)
  CHECK(rt::tuner_counters().tunes == tunes0 + 1);
  auto stored = rt::lookup_tuning(rt.device(), job.spec, o.key);
  REQUIRE(stored);
  CHECK(stored->best.str() == o.result.best.str());
  bool any_tuning_file = false;
  for (const auto& e : fs::directory_iterator(cache.dir.path + "/tuning")) any_tuning_file |= e.path().extension() == ".yaml";
  CHECK(any_tuning_file);

  // A second kernel, same spec (another name), a shape of the same bucket: uses the entry, no tuning.
  CompileOptions opts;
  if (!set_autotune(opts, "quick", true)) {
    WARN("CompileOptions has no autotune/tune_on_first_use yet (INTEGRATION.md edit 3): forward() not checked");
    return;
  }
  AttentionSpec again = job.spec;
  again.name = "second";
  Kernel k = rt.compile(again, opts);
  const size_t n = size_t(1) * 500 * 4 * 64;
  DeviceBuffer q = rt.alloc(n * 2), kk = rt.alloc(n * 2), v = rt.alloc(n * 2), out = rt.alloc(n * 2);
  q.fill_bytes(0), kk.fill_bytes(0), v.fill_bytes(0);
  ForwardArgs a;
  a.batch = 1, a.heads_q = a.heads_kv = 4, a.seq_q = a.seq_kv = 500;
  a.q = bshd(q.data(), 500, 4, 64), a.k = bshd(kk.data(), 500, 4, 64), a.v = bshd(v.data(), 500, 4, 64);
  a.o = bshd(out.data(), 500, 4, 64);
  const uint64_t hits0 = rt::tuner_counters().tuning_cache_hits;
  k.forward(a);
  k.forward(a);
  rt.synchronize();
  CHECK(rt::tuner_counters().tunes == tunes0 + 1);  // no second tuning
  CHECK(rt::tuner_counters().tuning_cache_hits == hits0 + 1);  // one lookup for the bucket, memoised after
}

TEST_CASE("tune: a compile-cache hit on the second Runtime::compile avoids LLVM", "[tune][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  ScopedCacheRoot cache;
  Runtime rt = Runtime::create(0);
  AttentionSpec spec = small_spec("window(128, 0)");
  const uint64_t llvm0 = rt::kernel_cache_counters().llvm_compiles;
  const auto t0 = std::chrono::steady_clock::now();
  Kernel cold = rt.compile(spec);
  const double cold_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (rt::kernel_cache_counters().llvm_compiles == llvm0) {
    WARN("Runtime::compile does not go through runtime/kernel_cache yet (INTEGRATION.md edit 2)");
    return;
  }
  const uint64_t llvm1 = rt::kernel_cache_counters().llvm_compiles;
  const auto t1 = std::chrono::steady_clock::now();
  Kernel warm = rt.compile(spec);
  const double warm_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  CHECK(rt::kernel_cache_counters().llvm_compiles == llvm1);
  CHECK(warm.compiled().key == cold.compiled().key);
  CHECK(warm.compiled().ptx == cold.compiled().ptx);
  CHECK(warm.registers() == cold.registers());
  CHECK(warm.spill_bytes() == cold.spill_bytes());
  CHECK(kernel_files(cache.dir.path) == 1);
  auto llvm_ms = [](const Kernel& k) {
    double ms = 0;
    for (const StageRecord& st : k.compiled().stages) ms += st.ms;
    return ms;
  };
  WARN("cold compile " << cold_ms << " ms (LLVM stages " << llvm_ms(cold) << " ms; the first compile of the process), cached "
                       << warm_ms << " ms");
  CHECK(warm_ms < 5);  // issue 5: ready to launch within 5 ms from the caches
  // More new specs in the same process (LLVM and the driver already initialised): what an
  // application pays for each new mask variant. Reported, not asserted (issue 5 asks for ≤ 300 ms).
  // Masks no other test compiles at d = 64, so the driver's own JIT cache (~/.nv/ComputeCache)
  // cannot serve the PTX (window(256, 0) did, in 108 ms).
  for (const char* mask : {"window(257, 0)", "causal && q - kv < 301", "causal_br && q - kv < 777"}) {
    const auto t = std::chrono::steady_clock::now();
    Kernel k = rt.compile(small_spec(mask));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
    WARN("cold compile of a new spec (" << mask << "): " << ms << " ms, LLVM stages " << llvm_ms(k) << " ms");
  }
}

TEST_CASE("tune: a forward inside a CUDA graph capture does not tune and leaves the capture valid", "[tune][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  // The capture calls come straight from the driver: the runtime needs none of them.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib);
  using Fn2 = int (*)(void*, int);
  auto stream_create = reinterpret_cast<int (*)(void**, unsigned)>(dlsym(lib, "cuStreamCreate"));
  auto begin_capture = reinterpret_cast<Fn2>(dlsym(lib, "cuStreamBeginCapture_v2"));
  auto end_capture = reinterpret_cast<int (*)(void*, void**)>(dlsym(lib, "cuStreamEndCapture"));
  auto graph_destroy = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cuGraphDestroy"));
  auto stream_destroy = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cuStreamDestroy_v2"));
  auto retain = reinterpret_cast<int (*)(void**, int)>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
  auto release = reinterpret_cast<int (*)(int)>(dlsym(lib, "cuDevicePrimaryCtxRelease_v2"));
  auto push = reinterpret_cast<int (*)(void*)>(dlsym(lib, "cuCtxPushCurrent_v2"));
  auto pop = reinterpret_cast<int (*)(void**)>(dlsym(lib, "cuCtxPopCurrent_v2"));
  REQUIRE((stream_create && begin_capture && end_capture && graph_destroy && stream_destroy && retain && release && push && pop));

  ScopedCacheRoot cache;
  Runtime rt = Runtime::create(0);
  CompileOptions opts;
  opts.autotune = "quick";
  Kernel k = rt.compile(small_spec("causal && q - kv < 311"), opts);  // a bucket no stored tuning has
  const int s = 300, h = 4, d = 64;
  const size_t n = size_t(1) * s * h * d;
  DeviceBuffer q = rt.alloc(n * 2), kk = rt.alloc(n * 2), v = rt.alloc(n * 2), out = rt.alloc(n * 2);
  q.fill_bytes(0), kk.fill_bytes(0), v.fill_bytes(0);
  ForwardArgs a;
  a.batch = 1, a.heads_q = a.heads_kv = h, a.seq_q = a.seq_kv = s;
  a.q = bshd(q.data(), s, h, d), a.k = bshd(kk.data(), s, h, d), a.v = bshd(v.data(), s, h, d), a.o = bshd(out.data(), s, h, d);
  // The runtime uses device 0's primary context; the test's stream must live in it.
  void* ctx = nullptr;
  REQUIRE(retain(&ctx, 0) == 0);
  REQUIRE(push(ctx) == 0);
  void* stream = nullptr;
  REQUIRE(stream_create(&stream, 1 /* CU_STREAM_NON_BLOCKING */) == 0);
  a.stream = stream;
  const uint64_t tunes0 = rt::tuner_counters().tunes;
  REQUIRE(begin_capture(stream, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */) == 0);
  CHECK_NOTHROW(k.forward(a));
  void* graph = nullptr;
  CHECK(end_capture(stream, &graph) == 0);  // CUDA_SUCCESS: nothing invalidated the capture
  CHECK(graph != nullptr);
  CHECK(rt::tuner_counters().tunes == tunes0);
  if (graph) graph_destroy(graph);
  // Outside the capture the same bucket is tuned on first use, as usual.
  k.forward(a);
  rt.synchronize();
  CHECK(rt::tuner_counters().tunes == tunes0 + 1);
  // A second kernel of the spec finds the stored tuning; inside a capture it still decides nothing
  // (loading the tuned module could break the capture) and the capture stays valid.
  Kernel k2 = rt.compile(small_spec("causal && q - kv < 311"), opts);
  REQUIRE(begin_capture(stream, 0) == 0);
  CHECK_NOTHROW(k2.forward(a));
  graph = nullptr;
  CHECK(end_capture(stream, &graph) == 0);
  if (graph) graph_destroy(graph);
  CHECK(rt::tuner_counters().tunes == tunes0 + 1);
  stream_destroy(stream);
  pop(&ctx);
  release(0);
}

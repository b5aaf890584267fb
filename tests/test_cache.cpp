// The on-disk caches through the public API (flashjit/cache.hpp) and `flashjit cache`: what list
// and show report, export/clear/import, and the exit codes of usage errors. Tunings come from an
// export file (a GPU-less machine cannot tune); compiled kernels are in tests/internal/test_cache_api.cpp.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "flashjit/cache.hpp"
#include "tests/support.hpp"

using namespace flashjit;
namespace fs = std::filesystem;

namespace {

const std::string kCli = (fs::read_symlink("/proc/self/exe").parent_path() / "flashjit").string();

// What `flashjit cache export` writes for two GPUs' tunings.
const char* kExport = R"Y(flashjit_tuning_export: 1
gpus:
  - schema: 1
    gpu: {name: "NVIDIA A100-SXM4-80GB", sm_count: 108, cc_major: 8, cc_minor: 0, driver_version: 12080}
    entries:
      - spec_hash: "fedcba9876543210"
        spec_name: "alibi"
        bucket: {seq_q: 1, seq_kv: 32768, batch_heads: 32, d_qk: 128, d_v: 128, group: 4}
        best: {block_m: 64, block_n: 64, num_warps: 4, num_stages: 2}
        median_ms: 1.25
        p20_ms: 1.225
        p80_ms: 1.2875
        date: "2026-12-01T10:20:30Z"
        flashjit_version: "0.1.0"
        mode: "quick"
        num_splits: 16
        runners_up:
          - {config: bm64_bn32_w4_s1, median_ms: 1.875}
          - {config: bm128_bn128_w8_s3, failed: "ptxas: 312 registers > 255 (\"spills\")"}
  - schema: 1
    gpu: {name: "NVIDIA H200", sm_count: 132, cc_major: 9, cc_minor: 0, driver_version: 13000}
    entries:
      - spec_hash: "fwd-42-0123456789abcdef"
        spec_name: "causal_bf16"
        bucket: {seq_q: 4096, seq_kv: 4096, batch_heads: 64, d_qk: 128, d_v: 128}
        best: {block_m: 128, block_n: 64, num_warps: 4, num_stages: 2}
        median_ms: 0.398
        p20_ms: 0.39004
        p80_ms: 0.40994
        date: "2026-12-01T10:20:30Z"
        flashjit_version: "0.1.0"
        mode: "quick"
        runners_up:
          - {config: bm64_bn32_w4_s1, median_ms: 0.597}
          - {config: bm128_bn128_w8_s3, failed: "ptxas: 312 registers > 255 (\"spills\")"}
)Y";

std::string write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

// A cache folder holding the two GPUs' tunings.
struct PopulatedCache {
  test::TempDir dir;
  PopulatedCache() {
    TuningImportSummary s = import_tunings(write(dir.path + "/fleet.yaml", kExport), dir.path);
    REQUIRE(s.added == 2);
  }
};

test::Command cache(const std::string& dir, const std::string& args) {
  return test::run_command("FLASHJIT_CACHE_DIR='" + dir + "' " + kCli + " cache " + args);
}

}  // namespace

TEST_CASE("cache API: list_cache reports every GPU identity's tunings, sorted, and the compile cache", "[cache]") {
  PopulatedCache c;
  CacheListing l = list_cache(c.dir.path);
  CHECK(l.cache_dir == c.dir.path);
  REQUIRE(l.gpus.size() == 2);
  CHECK(l.gpus[0].identity == "NVIDIA A100-SXM4-80GB, 108 SMs, cc 8.0, driver 12080");
  CHECK(l.gpus[1].identity == "NVIDIA H200, 132 SMs, cc 9.0, driver 13000");
  REQUIRE(l.tunings.size() == 2);
  const CachedTuning& h200 = l.tunings[1];
  CHECK(h200.gpu.sm_count == 132);
  CHECK(h200.spec_name == "causal_bf16");
  CHECK(h200.spec_hash == "fwd-42-0123456789abcdef");
  CHECK(h200.bucket.name == "sq4096_skv4096_bh64_d128x128");
  CHECK(h200.bucket.batch_heads == 64);
  CHECK(h200.config.str() == "bm128_bn64_w4_s2");
  CHECK(h200.median_ms == 0.398);
  CHECK(h200.p20_ms <= h200.median_ms);
  CHECK(h200.mode == "quick");
  REQUIRE(h200.runners_up.size() == 2);
  CHECK(h200.runners_up[0].ok);
  CHECK_FALSE(h200.runners_up[1].ok);
  CHECK_THAT(h200.runners_up[1].failure, Catch::Contains("312 registers"));
  CHECK(h200.id.size() == 12);
  CHECK(h200.num_splits == 0);  // prefill: automatic
  CHECK(h200.bucket.group == 1);
  const CachedTuning& decode = l.tunings[0];  // a decode bucket with a GQA group and tuned splits
  CHECK(decode.bucket.group == 4);
  CHECK(decode.bucket.name == "sq1_skv32768_bh32_d128x128_g4");
  CHECK(decode.num_splits == 16);
  CHECK(l.kernels.entries == 0);
  CHECK(l.kernels.max_bytes == (uint64_t(1) << 30));
  const std::string json = cache_listing_json(l);
  CHECK_THAT(json, Catch::StartsWith("{\"cache_dir\":") && Catch::Contains("\"tuning\":[{\"id\":\"") &&
                       Catch::Contains("\"config\":\"bm128_bn64_w4_s2\"") && Catch::Contains("\"median_ms\":0.398") &&
                       Catch::Contains("\"name\":\"sq1_skv32768_bh32_d128x128_g4\"") &&
                       Catch::Contains("\"group\":4") && Catch::Contains("\"num_splits\":16") &&
                       Catch::Contains("\"kernels\":{\"dir\":") && Catch::Contains("\"count\":0"));
}

TEST_CASE("cache API: find_cache_entry by id prefix, export, clear and import", "[cache]") {
  PopulatedCache c;
  const std::string id = list_cache(c.dir.path).tunings[1].id;
  CacheEntry e = find_cache_entry(id.substr(0, 8), c.dir.path);
  REQUIRE(e.found());
  REQUIRE(e.tuning);
  CHECK(e.tuning->id == id);
  CHECK_THAT(cache_entry_json(e), Catch::StartsWith("{\"id\":\"" + id + "\""));
  CacheEntry none = find_cache_entry("zzzz", c.dir.path);
  CHECK_FALSE(none.found());
  CHECK_THAT(none.missing, Catch::Contains("'zzzz'"));
  CHECK_THROWS_AS(cache_entry_json(none), Error);
  CHECK_THROWS_AS(find_cache_entry("", c.dir.path), Error);

  const std::string text = export_tunings(c.dir.path);
  CHECK_THAT(text, Catch::Contains("flashjit_tuning_export: 1"));
  export_tunings_to_file(c.dir.path + "/again.yaml", c.dir.path);
  CacheClearSummary cleared = clear_cache(c.dir.path);
  CHECK(cleared.tuning_files == 2);
  CHECK(cleared.kernels == 0);
  CHECK(list_cache(c.dir.path).tunings.empty());
  TuningImportSummary s = import_tunings(c.dir.path + "/again.yaml", c.dir.path);
  CHECK(s.gpus == 2);
  CHECK(s.added == 2);
  CHECK(export_tunings(c.dir.path) == text);
  TuningImportSummary twice = import_tunings(c.dir.path + "/again.yaml", c.dir.path);
  CHECK(twice.added == 0);
  CHECK(twice.kept == 2);
  try {
    import_tunings(c.dir.path + "/nope.yaml", c.dir.path);
    FAIL("a missing file was imported");
  } catch (const Error& err) {
    CHECK(err.kind() == ErrorKind::usage);
    CHECK_THAT(err.what(), Catch::Contains("does not exist"));
  }
}

TEST_CASE("cli: cache list shows GPU identity, spec, bucket, config and time, and a kernel summary", "[cache][cli]") {
  PopulatedCache c;
  auto r = cache(c.dir.path, "list");
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("NVIDIA H200, 132 SMs, cc 9.0, driver 13000"));
  CHECK_THAT(r.output, Catch::Contains("NVIDIA A100-SXM4-80GB, 108 SMs, cc 8.0, driver 12080"));
  CHECK_THAT(r.output, Catch::Contains("causal_bf16 (fwd-42-0123456789ab)"));
  CHECK_THAT(r.output, Catch::Contains("alibi (fedcba987654)"));  // a key of no kernel family: its hash's head
  CHECK_THAT(r.output, Catch::Contains("sq4096_skv4096_bh64_d128x128"));
  CHECK_THAT(r.output, Catch::Contains("bm128_bn64_w4_s2"));
  CHECK_THAT(r.output, Catch::Contains("0.3980"));
  CHECK_THAT(r.output, Catch::Contains("2 entries for 2 GPU identities"));
  CHECK_THAT(r.output, Catch::Contains("0 kernels, 0 B of 1.0 GiB"));
  auto j = cache(c.dir.path, "list --json");
  CHECK(j.code == 0);
  CHECK(j.output == cache_listing_json(list_cache(c.dir.path)) + "\n");
  CHECK(cache(c.dir.path, "--json list").output == j.output);
}

TEST_CASE("cli: cache show prints a tuning entry by id prefix, and exits 1 for no match", "[cache][cli]") {
  PopulatedCache c;
  const std::string id = list_cache(c.dir.path).tunings[1].id;
  auto r = cache(c.dir.path, "show " + id.substr(0, 8));
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("tuning entry " + id));
  CHECK_THAT(r.output, Catch::Contains("median     0.3980 ms (p20 0.3900, p80 0.4099)"));
  CHECK_THAT(r.output, Catch::Contains("by flashjit 0.1.0 (quick mode)"));
  CHECK_THAT(r.output, Catch::Contains("runners-up"));
  CHECK_THAT(r.output, Catch::Contains("failed: ptxas: 312 registers"));
  CHECK_THAT(r.output, !Catch::Contains("split-KV"));
  auto d = cache(c.dir.path, "show " + list_cache(c.dir.path).tunings[0].id);
  CHECK_THAT(d.output, Catch::Contains("bucket     sq1_skv32768_bh32_d128x128_g4") &&
                           Catch::Contains("config     bm64_bn64_w4_s2, split-KV 16 pieces (tuned)"));
  auto j = cache(c.dir.path, "show --json " + id);
  CHECK(j.code == 0);
  CHECK(j.output == cache_entry_json(find_cache_entry(id, c.dir.path)) + "\n");
  auto none = cache(c.dir.path, "show zzzz");
  CHECK(none.code == 1);
  CHECK_THAT(none.output, Catch::Contains("flashjit cache show: no tuning entry has an id starting with 'zzzz'"));
}

TEST_CASE("cli: cache export, clear, import", "[cache][cli]") {
  PopulatedCache c;
  const std::string before = cache(c.dir.path, "list --json").output;
  const std::string file = c.dir.path + "/exported.yaml";
  auto e = cache(c.dir.path, "export " + file);
  CHECK(e.code == 0);
  CHECK_THAT(e.output, Catch::Contains("exported the tuning cache to " + file));
  auto cl = cache(c.dir.path, "clear");
  CHECK(cl.code == 0);
  CHECK_THAT(cl.output, Catch::Contains("removed 2 tuning files and 0 compiled kernels from " + c.dir.path));
  CHECK_THAT(cache(c.dir.path, "list").output, Catch::Contains("0 entries for 0 GPU identities"));
  auto i = cache(c.dir.path, "import " + file);
  CHECK(i.code == 0);
  CHECK_THAT(i.output, Catch::Contains("2 added, 0 replaced (faster), 0 kept (cached entry as fast or faster), over 2 "
                                       "GPU identities"));
  CHECK(cache(c.dir.path, "list --json").output == before);
  auto out = cache(c.dir.path, "export -");
  CHECK(out.code == 0);
  CHECK_THAT(out.output, Catch::Contains("flashjit_tuning_export: 1"));
}

TEST_CASE("cli: cache usage errors exit 2 naming the problem, and --help exits 0", "[cache][cli]") {
  test::TempDir dir;
  for (const char* sub : {"", " list", " show", " clear", " export", " import"}) {
    auto h = cache(dir.path, std::string(sub) + " --help");
    CHECK(h.code == 0);
    CHECK_THAT(h.output, Catch::Contains("usage: flashjit cache" + std::string(sub)));
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "missing command"},
      {"frobnicate", "unknown command 'frobnicate'"},
      {"show", "KEY is required"},
      {"show ''", "KEY: expected an id or hash"},
      {"list extra", "unexpected argument 'extra'"},
      {"export", "FILE is required"},
      {"import", "FILE is required"},
      {"clear --json", "unknown option '--json'"},
      {"--json clear", "--json applies to list and show only"},
      {"list --fast", "unknown option '--fast'; allowed: -h/--help, --json"}};
  for (const auto& [args, says] : bad) {
    auto r = cache(dir.path, args);
    INFO(args << ": " << r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::StartsWith("flashjit cache") && Catch::Contains(says));
  }
  auto missing = cache(dir.path, "import " + dir.path + "/nope.yaml");
  CHECK(missing.code == 2);
  CHECK_THAT(missing.output, Catch::Contains("flashjit cache import: '" + dir.path + "/nope.yaml' does not exist"));
  auto bad_file = cache(dir.path, "import " + write(dir.path + "/bad.yaml", "flashjit_tuning_export: 1\ngpus: 3\n"));
  CHECK(bad_file.code == 2);
  CHECK_THAT(bad_file.output, Catch::Contains("'gpus' is not a list"));
  auto bad_knob = test::run_command("FLASHJIT_CACHE_MAX_BYTES=lots FLASHJIT_CACHE_DIR='" + dir.path + "' " + kCli +
                                    " cache list");
  CHECK(bad_knob.code == 2);
  CHECK_THAT(bad_knob.output, Catch::Contains("FLASHJIT_CACHE_MAX_BYTES"));
}

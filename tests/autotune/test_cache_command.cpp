// `flashjit cache ...` through run_cache_command: what list and show print, export/clear/import,
// and the exit codes of usage errors.
#include <catch2/catch.hpp>

#include <sstream>

#include "autotune/cache_command.hpp"
#include "autotune/durable_file.hpp"
#include "helpers.hpp"

namespace flashjit::autotune::test {
namespace {

struct Run {
  int code;
  std::string out, err;
};

Run cache(const std::string& root, std::vector<std::string> args) {
  std::ostringstream out, err;
  CacheCommandEnv env{root, "0.1.0", uint64_t(1) << 30};
  int code = run_cache_command(args, env, out, err);
  return {code, out.str(), err.str()};
}

// Two GPUs' tunings and two compiled kernels.
void populate(const std::string& root) {
  TuningCache tc(root, "0.1.0");
  tc.store(sample_gpu(), sample_tuning_key("0123456789abcdef"), sample_entry(128, 0.398, "causal_bf16"));
  tc.store(GpuIdentity{"NVIDIA A100-SXM4-80GB", 108, 8, 0, 12080}, sample_tuning_key("fedcba9876543210", 1024),
           sample_entry(64, 1.25, "alibi"));
  CompileCache cc(root);
  REQUIRE(cc.put(sample_key("0.1.0", 13000, "a", "c"), sample_artifacts("a", 5000)));
  REQUIRE(cc.put(sample_key("0.1.0", 13000, "b", "c"), sample_artifacts("b", 5000)));
}

}  // namespace

TEST_CASE("cache list shows GPU identity, spec, bucket, config and time, and a kernel summary", "[autotune][cli]") {
  TempDir dir;
  populate(dir.path());
  Run r = cache(dir.path(), {"list"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("NVIDIA H200, 132 SMs, cc 9.0, driver 13000"));
  CHECK_THAT(r.out, Catch::Contains("NVIDIA A100-SXM4-80GB, 108 SMs, cc 8.0, driver 12080"));
  CHECK_THAT(r.out, Catch::Contains("causal_bf16 (0123456789ab)"));
  CHECK_THAT(r.out, Catch::Contains("sq4096_skv4096_bh64_d128x128"));
  CHECK_THAT(r.out, Catch::Contains("bm128_bn64_w4_s2"));
  CHECK_THAT(r.out, Catch::Contains("0.3980"));
  CHECK_THAT(r.out, Catch::Contains("2 entries for 2 GPU identities"));
  CHECK_THAT(r.out, Catch::Contains("2 kernels"));

  Run j = cache(dir.path(), {"list", "--json"});
  CHECK(j.code == 0);
  const llvm::json::Value list = parse_json(j.out);
  const llvm::json::Object& top = *list.getAsObject();
  CHECK(top.getObject("kernels")->getInteger("count") == 2);
  const llvm::json::Array& tuning = *top.getArray("tuning");
  REQUIRE(tuning.size() == 2);
  const llvm::json::Object &a100 = *tuning[0].getAsObject(), &h200 = *tuning[1].getAsObject();  // sorted by identity
  CHECK(h200.getString("config") == "bm128_bn64_w4_s2");
  CHECK(h200.getNumber("median_ms") == 0.398);
  CHECK(a100.getObject("bucket")->getString("name") == "sq1024_skv1024_bh64_d128x128");
}

TEST_CASE("cache show prints a tuning entry or a compiled kernel by id prefix", "[autotune][cli]") {
  TempDir dir;
  populate(dir.path());
  TuningCache tc(dir.path(), "0.1.0");
  std::vector<TuningFile> files = tc.load_all();
  REQUIRE(files.size() == 2);
  const std::string id = record_id(files[1].gpu, files[1].records[0]);  // the H200 one (sorted by identity)
  Run r = cache(dir.path(), {"show", id.substr(0, 8)});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("tuning entry " + id));
  CHECK_THAT(r.out, Catch::Contains("runners-up"));
  CHECK_THAT(r.out, Catch::Contains("failed: ptxas: 312 registers"));
  Run j = cache(dir.path(), {"show", id, "--json"});
  CHECK(j.code == 0);
  CHECK(parse_json(j.out).getAsObject()->getString("id") == id);

  const std::string hash = CompileCache::hash_key(sample_key("0.1.0", 13000, "a", "c"));
  Run k = cache(dir.path(), {"show", hash.substr(0, 10)});
  INFO(k.out << k.err);
  CHECK(k.code == 0);
  CHECK_THAT(k.out, Catch::Contains("entry      flashjit_fwd_a"));
  CHECK_THAT(k.out, Catch::Contains("spec a"));  // the key text

  Run none = cache(dir.path(), {"show", "zzzz"});
  CHECK(none.code == 1);
  CHECK_THAT(none.err, Catch::Contains("'zzzz'"));
}

TEST_CASE("cache export, clear, import through the command", "[autotune][cli]") {
  TempDir dir;
  populate(dir.path());
  const std::string before = cache(dir.path(), {"list", "--json"}).out;
  const std::string file = dir.path() + "/fleet.yaml";
  CHECK(cache(dir.path(), {"export", file}).code == 0);
  Run c = cache(dir.path(), {"clear"});
  CHECK(c.code == 0);
  CHECK_THAT(c.out, Catch::Contains("removed 2 tuning files and 2 compiled kernels"));
  CHECK_THAT(cache(dir.path(), {"list"}).out, Catch::Contains("0 entries for 0 GPU identities"));
  Run i = cache(dir.path(), {"import", file});
  CHECK(i.code == 0);
  CHECK_THAT(i.out, Catch::Contains("2 added, 0 replaced"));
  std::string after = cache(dir.path(), {"list", "--json"}).out;
  // Same tuning entries; the kernels were cleared (export covers tunings only).
  CHECK(after.substr(0, after.find("\"kernels\"")) == before.substr(0, before.find("\"kernels\"")));
  Run out = cache(dir.path(), {"export", "-"});
  CHECK_THAT(out.out, Catch::Contains("flashjit_tuning_export: 1"));
}

TEST_CASE("cache command usage errors exit 2 with a message, --help exits 0", "[autotune][cli]") {
  TempDir dir;
  CHECK(cache(dir.path(), {"--help"}).code == 0);
  CHECK_THAT(cache(dir.path(), {"--help"}).out, Catch::Contains("usage: flashjit cache"));
  const std::vector<std::vector<std::string>> bad = {
      {}, {"frobnicate"}, {"show"}, {"list", "extra"}, {"export"}, {"import"}, {"clear", "--json"}, {"list", "--fast"}};
  for (const auto& args : bad) {
    Run r = cache(dir.path(), args);
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::StartsWith("flashjit cache: "));
  }
  Run missing = cache(dir.path(), {"import", dir.path() + "/nope.yaml"});
  CHECK(missing.code == 2);
  CHECK_THAT(missing.err, Catch::Contains("does not exist"));
  write_file_durable(dir.path() + "/bad.yaml", "flashjit_tuning_export: 1\ngpus: 3\n");
  Run bad_file = cache(dir.path(), {"import", dir.path() + "/bad.yaml"});
  CHECK(bad_file.code == 2);
  CHECK_THAT(bad_file.err, Catch::Contains("'gpus' is not a list"));
}

}  // namespace flashjit::autotune::test

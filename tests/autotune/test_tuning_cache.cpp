// The tuning cache: keys and buckets, versions, corrupt files moved aside, export/clear/import.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "autotune/durable_file.hpp"
#include "autotune/tuning_yaml.hpp"
#include "helpers.hpp"

namespace fs = std::filesystem;

namespace flashjit::autotune::test {
namespace {

void overwrite(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

std::vector<std::string> corrupt_files(const std::string& dir) {
  std::vector<std::string> out;
  for (auto& f : fs::directory_iterator(dir))
    if (f.path().filename().string().find(".corrupt-") != std::string::npos) out.push_back(f.path().string());
  return out;
}

TuningEntry stamped(TuningEntry e, const std::string& version) {
  e.flashjit_version = version;
  return e;
}

}  // namespace

TEST_CASE("shape buckets round sequence lengths and batch x heads up to powers of two", "[autotune][tuning]") {
  ShapeBucket b = ShapeBucket::of(3, 10, 1000, 4097, 96, 64);
  CHECK(b.seq_q == 1024);
  CHECK(b.seq_kv == 8192);
  CHECK(b.batch_heads == 32);
  CHECK(b.d_qk == 96);
  CHECK(b.d_v == 64);
  CHECK(b.str() == "sq1024_skv8192_bh32_d96x64");
  CHECK(ShapeBucket::of(1, 1, 1024, 1024, 128, 128) == ShapeBucket::of(1, 1, 513, 1023, 128, 128));
  CHECK_FALSE(ShapeBucket::of(1, 1, 1024, 1024, 128, 128) == ShapeBucket::of(1, 1, 1025, 1024, 128, 128));
  // The GQA group is exact and part of the key (packing divides the CTA count by it); one query
  // head per K/V head keeps the old name.
  const ShapeBucket packed = ShapeBucket::of(1, 32, 1, 32768, 128, 128, 8);
  CHECK(packed.group == 4);
  CHECK(packed.str() == "sq1_skv32768_bh32_d128x128_g4");
  CHECK_FALSE(packed == ShapeBucket::of(1, 32, 1, 32768, 128, 128, 32));
  CHECK(ShapeBucket::of(1, 32, 1, 32768, 128, 128, 32).str() == "sq1_skv32768_bh32_d128x128");
  CHECK(ShapeBucket::of(1, 32, 1, 32768, 128, 128) == ShapeBucket::of(1, 32, 1, 32768, 128, 128, 32));
  // A paged cache's page size is part of the key too (contiguous: 0, the old name).
  ShapeBucket paged = packed;
  paged.page_size = 16;
  CHECK(paged.str() == "sq1_skv32768_bh32_d128x128_g4_p16");
  CHECK_FALSE(paged == packed);
  CHECK(round_up_pow2(0) == 1);
  CHECK(round_up_pow2(1) == 1);
  CHECK(round_up_pow2(4096) == 4096);
}

TEST_CASE("config names and GPU file names", "[autotune][tuning]") {
  TileConfig c{128, 64, 8, 3};
  CHECK(config_name(c) == "bm128_bn64_w8_s3");
  auto back = parse_config_name("bm128_bn64_w8_s3");
  REQUIRE(back);
  CHECK(same_config(*back, c));
  for (const char* bad : {"", "bm128", "bm128_bn64_w8_s3x", "bm0_bn64_w8_s3", "bn64_bm128_w8_s3", "bm-1_bn64_w8_s3"})
    CHECK_FALSE(parse_config_name(bad));
  GpuIdentity g{"NVIDIA H200 / NVL (test)", 132, 9, 0, 13000};
  // The readable part, then 12 hex digits of the SHA-256 of the whole identity.
  const std::string stem = g.file_stem();
  CHECK(stem.rfind("NVIDIA_H200_NVL_test_-132sm-cc90-drv13000-", 0) == 0);
  CHECK(stem.size() == std::string("NVIDIA_H200_NVL_test_-132sm-cc90-drv13000-").size() + 12);
  CHECK(stem.find_first_not_of("0123456789abcdef", stem.size() - 12) == std::string::npos);
  CHECK(GpuIdentity{".hidden", 1, 8, 0, 1}.file_stem().front() != '.');
}

TEST_CASE("tuning cache: store then lookup, while other keys, drivers and flashjit versions miss", "[autotune][tuning]") {
  TempDir dir;
  TuningCache tc(dir.path(), "0.1.0");
  const TuningKey key = sample_tuning_key("abc123");
  tc.store(sample_gpu(), key, sample_entry(128, 0.4));
  StderrCapture err;
  auto e = tc.lookup(sample_gpu(), key);
  REQUIRE(e);
  CHECK(same_entry(*e, stamped(sample_entry(128, 0.4), "0.1.0")));
  CHECK_FALSE(tc.lookup(sample_gpu(), sample_tuning_key("abc123", 8192)));  // another bucket
  CHECK_FALSE(tc.lookup(sample_gpu(), sample_tuning_key("def456")));        // another spec
  CHECK_FALSE(tc.lookup(sample_gpu(12080), key));                           // another driver
  TuningCache next(dir.path(), "0.2.0");
  CHECK_FALSE(next.lookup(sample_gpu(), key));                              // another flashjit
  next.store(sample_gpu(), key, sample_entry(64, 0.5));
  CHECK(next.lookup(sample_gpu(), key)->best.block_m == 64);
  CHECK(tc.lookup(sample_gpu(), key)->best.block_m == 128);  // each version keeps its own
  CHECK(err.warnings() == 0);
  // A new store of the same key replaces the old measurement (the newest tuning wins locally).
  tc.store(sample_gpu(), key, sample_entry(64, 0.45));
  CHECK(tc.lookup(sample_gpu(), key)->median_ms == 0.45);
  CHECK(tc.path_for(sample_gpu()) == dir.path() + "/tuning/" + sample_gpu().file_stem() + ".yaml");
  CHECK(tc.path_for(sample_gpu()).rfind(dir.path() + "/tuning/NVIDIA_H200-132sm-cc90-drv13000-", 0) == 0);
}

TEST_CASE("tuning cache: an unreadable file is moved aside with one warning and a fresh one started",
          "[autotune][tuning]") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"bad YAML", "schema: 1\ngpu: [unclosed\n"},
      {"older schema", "schema: 0\ngpu: {name: x}\nentries: []\n"},
      {"random bytes", std::string("\x01\x7f\xfe garbage \x00\x02 {{{", 18)},
      {"missing field", "schema: 1\ngpu: {name: \"NVIDIA H200\", sm_count: 132, cc_major: 9, cc_minor: 0, "
                        "driver_version: 13000}\nentries:\n  - {spec_hash: x}\n"},
  };
  for (const auto& [what, text] : bad) {
    INFO(what);
    TempDir dir;
    TuningCache tc(dir.path(), "0.1.0");
    const GpuIdentity other{"NVIDIA A100", 108, 8, 0, 13000};
    tc.store(other, sample_tuning_key("k"), sample_entry(64, 1.0));  // must survive
    const std::string path = tc.path_for(sample_gpu());
    const std::string& content = text;
    overwrite(path, content);
    {
      StderrCapture err;
      CHECK_FALSE(tc.lookup(sample_gpu(), sample_tuning_key("k")));
      CHECK(err.warnings() == 1);
    }
    auto aside = corrupt_files(dir.path() + "/tuning");
    REQUIRE(aside.size() == 1);
    CHECK(read_file_status(aside[0]).content == content);  // kept, byte for byte
    CHECK_FALSE(fs::exists(path));
    tc.store(sample_gpu(), sample_tuning_key("k"), sample_entry(128, 0.3));  // a fresh file
    CHECK(tc.lookup(sample_gpu(), sample_tuning_key("k"))->median_ms == 0.3);
    CHECK(tc.lookup(other, sample_tuning_key("k"))->median_ms == 1.0);
  }
}

TEST_CASE("tuning cache: a corrupt file found by a writer is moved aside and the write succeeds", "[autotune][tuning]") {
  TempDir dir;
  TuningCache tc(dir.path(), "0.1.0");
  fs::create_directories(dir.path() + "/tuning");
  overwrite(tc.path_for(sample_gpu()), "{{{{ not yaml");
  StderrCapture err;
  tc.store(sample_gpu(), sample_tuning_key("k"), sample_entry(64, 0.2));
  CHECK(err.warnings() == 1);
  CHECK(corrupt_files(dir.path() + "/tuning").size() == 1);
  CHECK(tc.lookup(sample_gpu(), sample_tuning_key("k")));
}

TEST_CASE("tuning cache: export, clear, import restores the same entries", "[autotune][tuning]") {
  TempDir dir;
  TuningCache tc(dir.path(), "0.1.0");
  const GpuIdentity a100{"NVIDIA A100-SXM4-80GB", 108, 8, 0, 12080};
  tc.store(sample_gpu(), sample_tuning_key("s1"), sample_entry(128, 0.123456789012345));
  tc.store(sample_gpu(), sample_tuning_key("s1", 16384), sample_entry(64, 2.5));
  tc.store(a100, sample_tuning_key("s2"), sample_entry(64, 1.0 / 3.0, "a \"quoted\" name: with colon"));
  const std::vector<TuningFile> before = tc.load_all();
  const std::string exported = tc.export_yaml();
  const std::string file = dir.path() + "/export.yaml";
  write_file_durable(file, exported);

  CHECK(tc.clear() == 2);
  CHECK(tc.load_all().empty());
  CHECK_FALSE(tc.lookup(sample_gpu(), sample_tuning_key("s1")));

  ImportSummary s = tc.import_yaml(read_file_status(file).content, file);
  CHECK(s.gpus == 2);
  CHECK(s.added == 3);
  CHECK(s.replaced == 0);
  const std::vector<TuningFile> after = tc.load_all();
  REQUIRE(after.size() == before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    CHECK(after[i].gpu == before[i].gpu);
    REQUIRE(after[i].records.size() == before[i].records.size());
    for (size_t k = 0; k < before[i].records.size(); ++k) {
      CHECK(after[i].records[k].key == before[i].records[k].key);
      CHECK(same_entry(after[i].records[k].entry, before[i].records[k].entry));  // exact doubles too
    }
  }
  CHECK(tc.export_yaml() == exported);
}

TEST_CASE("tuning cache: import keeps the faster entry for the same GPU and key", "[autotune][tuning]") {
  TempDir mine_dir, theirs_dir;
  TuningCache mine(mine_dir.path(), "0.1.0"), theirs(theirs_dir.path(), "0.1.0");
  mine.store(sample_gpu(), sample_tuning_key("a"), sample_entry(64, 0.50));
  mine.store(sample_gpu(), sample_tuning_key("b"), sample_entry(64, 0.30));
  theirs.store(sample_gpu(), sample_tuning_key("a"), sample_entry(128, 0.40));  // faster: replaces
  theirs.store(sample_gpu(), sample_tuning_key("b"), sample_entry(128, 0.35));  // slower: kept out
  theirs.store(sample_gpu(), sample_tuning_key("c"), sample_entry(128, 0.70));  // new: added
  ImportSummary s = mine.import_yaml(theirs.export_yaml(), "theirs");
  CHECK(s.added == 1);
  CHECK(s.replaced == 1);
  CHECK(s.kept == 1);
  CHECK(mine.lookup(sample_gpu(), sample_tuning_key("a"))->best.block_m == 128);
  CHECK(mine.lookup(sample_gpu(), sample_tuning_key("a"))->median_ms == 0.40);
  CHECK(mine.lookup(sample_gpu(), sample_tuning_key("b"))->best.block_m == 64);
  CHECK(mine.lookup(sample_gpu(), sample_tuning_key("c"))->median_ms == 0.70);
}

TEST_CASE("tuning cache: a tuned split-KV count round-trips, is optional, and is range-checked", "[autotune][tuning]") {
  TempDir dir;
  TuningCache tc(dir.path(), "0.1.0");
  TuningEntry split = sample_entry(64, 0.05);
  split.num_splits = 16;
  tc.store(sample_gpu(), sample_tuning_key("dec"), split);
  // The same bucket with a GQA group of 4 is another key, stored and read back apart.
  TuningKey grouped = sample_tuning_key("dec");
  grouped.bucket.group = 4;
  tc.store(sample_gpu(), grouped, sample_entry(128, 0.04));
  REQUIRE(tc.lookup(sample_gpu(), grouped));
  CHECK(tc.lookup(sample_gpu(), grouped)->best.block_m == 128);
  CHECK(tc.lookup(sample_gpu(), sample_tuning_key("dec"))->best.block_m == 64);
  // So is a paged bucket (16-row pages).
  TuningKey paged = grouped;
  paged.bucket.page_size = 16;
  CHECK_FALSE(tc.lookup(sample_gpu(), paged));
  tc.store(sample_gpu(), paged, sample_entry(32, 0.03));
  REQUIRE(tc.lookup(sample_gpu(), paged));
  CHECK(tc.lookup(sample_gpu(), paged)->best.block_m == 32);
  CHECK(tc.lookup(sample_gpu(), grouped)->best.block_m == 128);
  tc.store(sample_gpu(), sample_tuning_key("pre"), sample_entry(128, 0.5));
  CHECK(tc.lookup(sample_gpu(), sample_tuning_key("dec"))->num_splits == 16);
  CHECK(tc.lookup(sample_gpu(), sample_tuning_key("pre"))->num_splits == 0);
  // Written only when tuned, so files of entries without it read the same in older flashjits.
  const std::string text = read_file_status(tc.path_for(sample_gpu())).content;
  CHECK(text.find("num_splits: 16") != std::string::npos);
  CHECK(text.find("num_splits") == text.rfind("num_splits"));
  // Export and import carry it.
  TempDir other;
  TuningCache copy(other.path(), "0.1.0");
  copy.import_yaml(tc.export_yaml(), "bundle.yaml");
  CHECK(copy.lookup(sample_gpu(), sample_tuning_key("dec"))->num_splits == 16);
  CHECK(copy.lookup(sample_gpu(), paged)->best.block_m == 32);
  std::string odd_page = tc.export_yaml();
  odd_page.replace(odd_page.find("page_size: 16"), 13, "page_size: 24");
  CHECK_THROWS_WITH(copy.import_yaml(odd_page, "odd.yaml"), Catch::Contains("page_size 24 is not a multiple of 16"));
  // Out of range: the import names the field and what is allowed.
  std::string bad = tc.export_yaml();
  bad.replace(bad.find("num_splits: 16"), 14, "num_splits: 129");
  CHECK_THROWS_WITH(copy.import_yaml(bad, "bad.yaml"), Catch::Contains("num_splits is 129") && Catch::Contains("0 (automatic) to 128"));
}

TEST_CASE("tuning cache: a malformed import names the problem and changes nothing", "[autotune][tuning]") {
  TempDir dir;
  TuningCache tc(dir.path(), "0.1.0");
  tc.store(sample_gpu(), sample_tuning_key("a"), sample_entry(64, 0.5));
  const std::string before = read_file_status(tc.path_for(sample_gpu())).content;
  std::string good_then_bad = tc.export_yaml();
  good_then_bad += "  - schema: 1\n    gpu: {name: x, sm_count: 1, cc_major: 8, cc_minor: 0, driver_version: 1}\n"
                   "    entries: [{spec_hash: h}]\n";
  CHECK_THROWS_WITH(tc.import_yaml(good_then_bad, "bundle.yaml"), Catch::Contains("bundle.yaml") && Catch::Contains("bucket"));
  CHECK_THROWS_WITH(tc.import_yaml("just: text\n", "x.yaml"), Catch::Contains("not a flashjit tuning export"));
  CHECK_THROWS_WITH(tc.import_yaml("flashjit_tuning_export: 7\ngpus: []\n", "x.yaml"), Catch::Contains("version 7"));
  CHECK(read_file_status(tc.path_for(sample_gpu())).content == before);
}

TEST_CASE("tuning cache: GPU identities whose names sanitise alike get their own files", "[autotune][tuning]") {
  TempDir dir;
  TuningCache tc(dir.path(), "0.1.0");
  const GpuIdentity a{"NVIDIA H200", 132, 9, 0, 13000}, b{"NVIDIA_H200", 132, 9, 0, 13000};
  CHECK(tc.path_for(a) != tc.path_for(b));
  StderrCapture err;
  tc.store(a, sample_tuning_key("k"), sample_entry(64, 1.0));
  tc.store(b, sample_tuning_key("k"), sample_entry(128, 2.0));
  ImportSummary s = tc.import_yaml(tc.export_yaml(), "round-trip");
  CHECK(s.kept == 2);
  CHECK(tc.lookup(a, sample_tuning_key("k"))->median_ms == 1.0);
  CHECK(tc.lookup(b, sample_tuning_key("k"))->median_ms == 2.0);
  CHECK(corrupt_files(dir.path() + "/tuning").empty());
  CHECK(err.warnings() == 0);
}

TEST_CASE("tuning cache: a newer schema's or another identity's file is left in place, unused and never overwritten",
          "[autotune][tuning]") {
  for (const std::string what : {"newer schema", "another GPU"}) {
    INFO(what);
    TempDir dir;
    TuningCache tc(dir.path(), "0.1.0");
    const GpuIdentity other{"NVIDIA A100", 108, 8, 0, 13000};
    tc.store(other, sample_tuning_key("k"), sample_entry(64, 1.0));
    const std::string path = tc.path_for(sample_gpu());
    const std::string content =
        what == "newer schema"
            ? "schema: 2\ngpu: {name: \"NVIDIA H200\", sm_count: 132, cc_major: 9, cc_minor: 0, driver_version: 13000}\n"
              "entries: []\nfield_of_schema_2: {x: 1}\n"
            : read_file_status(tc.path_for(other)).content;
    overwrite(path, content);
    {
      StderrCapture err;
      CHECK_FALSE(tc.lookup(sample_gpu(), sample_tuning_key("k")));
      CHECK(err.warnings() == 1);
      CHECK_THAT(err.text(), Catch::Contains("left in place"));
    }
    {
      StderrCapture err;
      CHECK_THROWS_WITH(tc.store(sample_gpu(), sample_tuning_key("k"), sample_entry(128, 0.3)),
                        Catch::Contains("not overwritten"));
      TuningCache theirs(dir.path() + "/theirs", "0.1.0");
      theirs.store(sample_gpu(), sample_tuning_key("k"), sample_entry(128, 0.3));
      CHECK_THROWS_WITH(tc.import_yaml(theirs.export_yaml(), "theirs.yaml"),
                        Catch::Contains("not overwritten") && Catch::Contains("import of theirs.yaml stopped"));
    }
    CHECK(read_file_status(path).content == content);  // unchanged, byte for byte
    CHECK(corrupt_files(dir.path() + "/tuning").empty());
    CHECK(tc.lookup(other, sample_tuning_key("k"))->median_ms == 1.0);
  }
}


TEST_CASE("tuning cache: a file under the name used before the identity hash is still read, never written",
          "[autotune][tuning]") {
  TempDir dir;
  TuningCache tc(dir.path(), "0.1.0");
  const TuningKey key = sample_tuning_key("abc123");
  tc.store(sample_gpu(), key, sample_entry(128, 0.4));
  const std::string path = tc.path_for(sample_gpu());
  const std::string legacy = dir.path() + "/tuning/NVIDIA_H200-132sm-cc90-drv13000.yaml";
  REQUIRE(std::rename(path.c_str(), legacy.c_str()) == 0);  // as an earlier flashjit named it
  StderrCapture err;
  auto e = tc.lookup(sample_gpu(), key);
  REQUIRE(e);
  CHECK(e->best.block_m == 128);
  CHECK_FALSE(tc.lookup(sample_gpu(12080), key));  // another driver: neither name matches
  tc.store(sample_gpu(), sample_tuning_key("def456"), sample_entry(64, 0.5));  // goes to the new name
  CHECK(std::ifstream(path).good());
  CHECK(tc.lookup(sample_gpu(), key)->best.block_m == 128);
  CHECK(err.warnings() == 0);
}

}  // namespace flashjit::autotune::test

// The compile cache: round trips, misses with one warning for damaged files, keys that separate
// versions, LRU eviction, and the entry decoder against truncation and bit flips.
#include <catch2/catch.hpp>

#include <llvm/Support/xxhash.h>

#include <fstream>
#include <random>

#include "autotune/durable_file.hpp"
#include "helpers.hpp"

namespace flashjit::autotune::test {
namespace {

void overwrite(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string key(const std::string& spec) { return sample_key("0.1.0", 13000, spec, "bm64_bn64_w4_s2"); }

}  // namespace

TEST_CASE("compile cache: put then get returns the same artifacts, other keys miss silently", "[autotune][cache]") {
  TempDir dir;
  CompileCache cc(dir.path());
  KernelArtifacts a = sample_artifacts("a", 10000);
  REQUIRE(cc.put(key("a"), a));
  StderrCapture err;
  auto got = cc.get(key("a"));
  REQUIRE(got);
  CHECK(same_artifacts(*got, a));
  CHECK_FALSE(cc.get(key("b")));
  CHECK(err.warnings() == 0);
  CHECK(cc.path_for(key("a")) == dir.path() + "/kernels/" + CompileCache::hash_key(key("a")) + ".fjk");
  CHECK(CompileCache::hash_key(key("a")).size() == 64);
}

TEST_CASE("compile cache: an entry of another driver or flashjit version is never used", "[autotune][cache]") {
  TempDir dir;
  CompileCache cc(dir.path());
  const std::string mine = sample_key("0.1.0", 13000, "causal", "bm64_bn64_w4_s2");
  REQUIRE(cc.put(mine, sample_artifacts("mine")));
  StderrCapture err;
  CHECK_FALSE(cc.get(sample_key("0.1.0", 12080, "causal", "bm64_bn64_w4_s2")));  // another driver
  CHECK_FALSE(cc.get(sample_key("0.2.0", 13000, "causal", "bm64_bn64_w4_s2")));  // another flashjit
  CHECK(cc.put(sample_key("0.2.0", 13000, "causal", "bm64_bn64_w4_s2"), sample_artifacts("theirs")));
  auto got = cc.get(mine);  // still there and still mine
  REQUIRE(got);
  CHECK(same_artifacts(*got, sample_artifacts("mine")));
  CHECK(err.warnings() == 0);
}

TEST_CASE("compile cache: truncated, random, other-version and mismatched files are one warning and a miss",
          "[autotune][cache]") {
  TempDir dir;
  CompileCache cc(dir.path());
  for (const char* s : {"truncated", "random", "version", "mismatch", "empty", "keep"})
    REQUIRE(cc.put(key(s), sample_artifacts(s, 4000)));
  const std::string good = read_file_status(cc.path_for(key("keep"))).content;
  constexpr uint32_t kOtherVersion = kCompileCacheFormatVersion + 1;

  std::string t = read_file_status(cc.path_for(key("truncated"))).content;
  overwrite(cc.path_for(key("truncated")), t.substr(0, t.size() / 2));
  std::mt19937 rng(5);
  std::string noise(3000, '\0');
  for (char& c : noise) c = char(rng());
  overwrite(cc.path_for(key("random")), noise);
  overwrite(cc.path_for(key("version")), encode_kernel_entry(key("version"), sample_artifacts("version"), kOtherVersion));
  overwrite(cc.path_for(key("mismatch")), good);  // a valid entry, but for another key
  overwrite(cc.path_for(key("empty")), "");

  for (const char* s : {"truncated", "random", "version", "mismatch", "empty"}) {
    INFO(s);
    StderrCapture err;
    CHECK_FALSE(cc.get(key(s)));
    std::string text = err.text();
    CHECK(err.warnings() == 1);
    CHECK(text.find(cc.path_for(key(s))) != std::string::npos);  // the warning names the file
  }
  {
    StderrCapture err;
    auto kept = cc.get(key("keep"));  // the other entry is untouched
    REQUIRE(kept);
    CHECK(same_artifacts(*kept, sample_artifacts("keep", 4000)));
    CHECK(err.warnings() == 0);
  }
  {
    StderrCapture err;  // the warning says which format version it found
    cc.get(key("version"));
    CHECK(err.text().find("format version " + std::to_string(kOtherVersion)) != std::string::npos);
  }
  // The next put replaces each bad file; it then reads back without a warning.
  for (const char* s : {"truncated", "random", "version", "mismatch", "empty"}) {
    REQUIRE(cc.put(key(s), sample_artifacts(s, 4000)));
    StderrCapture err;
    auto got = cc.get(key(s));
    REQUIRE(got);
    CHECK(same_artifacts(*got, sample_artifacts(s, 4000)));
    CHECK(err.warnings() == 0);
  }
}

TEST_CASE("compile cache: LRU eviction keeps the bound and evicts the least recently used", "[autotune][cache]") {
  TempDir dir;
  const uint64_t entry = encode_kernel_entry(key("a"), sample_artifacts("a", 20000)).size();
  CompileCache cc(dir.path(), 3 * entry + entry / 2);  // room for three entries
  for (const char* s : {"a", "b", "c"}) REQUIRE(cc.put(key(s), sample_artifacts(s, 20000)));
  CHECK(cc.stats().entries == 3);
  REQUIRE(cc.get(key("a")));  // a becomes the most recently used; b is now the oldest
  REQUIRE(cc.put(key("d"), sample_artifacts("d", 20000)));
  CHECK(cc.get(key("a")));
  CHECK_FALSE(cc.get(key("b")));
  CHECK(cc.get(key("c")));
  CHECK(cc.get(key("d")));
  for (int i = 0; i < 10; ++i) {
    REQUIRE(cc.put(key("x" + std::to_string(i)), sample_artifacts("a", 20000)));
    CompileCacheStats st = cc.stats();
    CHECK(st.bytes <= cc.max_bytes());
    CHECK(st.entries == 3);
  }
  // list() is ordered least recently used first; the newest put is last.
  auto files = cc.list();
  REQUIRE(files.size() == 3);
  CHECK(files.back().hash == CompileCache::hash_key(key("x9")));
}

TEST_CASE("compile cache: an entry larger than the bound is not stored, with a warning", "[autotune][cache]") {
  TempDir dir;
  CompileCache cc(dir.path(), 1000);
  StderrCapture err;
  CHECK_FALSE(cc.put(key("big"), sample_artifacts("big", 5000)));
  CHECK(err.warnings() == 1);
  CHECK(cc.stats().entries == 0);
}

TEST_CASE("compile cache: an unwritable cache folder is a warning, not an exception", "[autotune][cache]") {
  TempDir dir;
  overwrite(dir.path() + "/not-a-dir", "x");
  CompileCache cc(dir.path() + "/not-a-dir");
  StderrCapture err;
  CHECK_FALSE(cc.put(key("a"), sample_artifacts("a")));
  CHECK_FALSE(cc.get(key("a")));
  CHECK(err.warnings() == 2);  // one for the failed put, one for the miss ("Not a directory")
}

TEST_CASE("kernel entry decoder: every truncation and bit flip is an error, never a crash", "[autotune][cache]") {
  const std::string bytes = encode_kernel_entry(key("z"), sample_artifacts("z", 600));
  REQUIRE(decode_kernel_entry(bytes).entry);
  for (size_t n = 0; n < bytes.size(); ++n) {
    DecodeResult r = decode_kernel_entry(std::string_view(bytes).substr(0, n));
    CHECK_FALSE(r.entry);
    CHECK_FALSE(r.error.empty());
  }
  std::mt19937 rng(1);
  for (int i = 0; i < 200; ++i) {
    std::string flipped = bytes;
    flipped[rng() % flipped.size()] ^= char(1 << (rng() % 8));
    CHECK_FALSE(decode_kernel_entry(flipped).entry);
  }
}

TEST_CASE("kernel entry decoder: an entry name that is not [A-Za-z0-9_] is damage, not a crash", "[autotune][cache]") {
  // A '\r' (or any non-symbol byte) in the name must not decode: the encoder could not write it back.
  std::string bytes = encode_kernel_entry(key("z"), sample_artifacts("z", 600));
  const size_t at = bytes.find("entry=flashjit_fwd_z");
  REQUIRE(at != std::string::npos);
  bytes[at + std::string("entry=flashjit").size()] = '\r';
  // A correct checksum (bytes 48..55 over the body after the 64-byte header), so the metadata is read.
  const uint64_t sum = llvm::xxh3_64bits(llvm::StringRef(bytes).substr(64));
  for (int i = 0; i < 8; ++i) bytes[48 + i] = char((sum >> (8 * i)) & 0xff);
  DecodeResult r = decode_kernel_entry(bytes);
  CHECK_FALSE(r.entry);
  CHECK_THAT(r.error, Catch::Contains("[A-Za-z0-9_]"));
}

TEST_CASE("parse_byte_size reads bytes and binary suffixes and rejects the rest", "[autotune][cache]") {
  CHECK(parse_byte_size("1073741824", "X") == (uint64_t(1) << 30));
  CHECK(parse_byte_size("1GiB", "X") == (uint64_t(1) << 30));
  CHECK(parse_byte_size("512M", "X") == (uint64_t(512) << 20));
  CHECK(parse_byte_size("64k", "X") == 65536);
  CHECK(parse_byte_size("100B", "X") == 100);
  for (const char* bad : {"", "GiB", "1.5G", "12Q", "-4", "99999999999999999999", "20000000000T"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_byte_size(bad, "FLASHJIT_CACHE_MAX_BYTES"), Catch::Contains("FLASHJIT_CACHE_MAX_BYTES"));
  }
}

}  // namespace flashjit::autotune::test

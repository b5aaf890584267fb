// flashjit's on-disk caches, seen from outside: the tuning cache (the best tile config per GPU
// identity, spec and shape bucket) and the compile cache (PTX and cubins of compiled kernels), and
// the ways to inspect, clear, export and import them. Every `dir` argument defaults ("") to
// cache_dir(); the compile cache's size bound is FLASHJIT_CACHE_MAX_BYTES. No LLVM or CUDA types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace flashjit {

// The GPU a tuning belongs to: tunings are valid only on the same model, SM count, compute
// capability and driver.
struct CacheGpu {
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  int driver_version = 0;
  std::string identity;  // "NVIDIA H200, 132 SMs, cc 9.0, driver 13000"
};

// The shapes that share a tuning: sequence lengths and batch×heads rounded up to powers of two;
// head dims and the GQA group (heads_q / heads_kv) exact.
struct CacheShapeBucket {
  int64_t seq_q = 0, seq_kv = 0, batch_heads = 0;
  int d_qk = 0, d_v = 0;
  std::string name;  // "sq4096_skv4096_bh64_d128x128" ("..._g4" for a group of 4)
  int64_t group = 1;
};

// A config the tuner measured besides the winner, or one that failed and why.
struct CacheRunnerUp {
  TileConfig config;
  bool ok = false;
  double median_ms = 0;
  std::string failure;  // when !ok
};

// One stored tuning. Times are medians and percentiles of CUDA-event timings, in milliseconds.
struct CachedTuning {
  std::string id;  // 12 hex digits, stable; find_cache_entry takes a unique prefix
  CacheGpu gpu;
  std::string spec_name;
  std::string spec_hash;  // hash of the spec's canonical text, name cleared
  CacheShapeBucket bucket;
  TileConfig config;
  double median_ms = 0, p20_ms = 0, p80_ms = 0;
  std::string date;              // ISO 8601 UTC
  std::string flashjit_version;  // the version that measured it; other versions ignore it
  std::string mode;              // "quick" | "full"
  std::vector<CacheRunnerUp> runners_up;
  int num_splits = 0;            // split-KV pieces the tuning chose (decode-like buckets); 0: automatic
};

// One compiled kernel of the compile cache.
struct CachedKernel {
  std::string hash;   // SHA-256 of `key`: the entry's file name
  std::string entry;  // PTX entry point
  int threads = 0;    // per CTA
  int shared_bytes = 0;
  int registers = -1, spill_bytes = -1;  // per thread, from the driver; -1: unknown
  std::string created;                   // ISO 8601 UTC
  uint64_t ptx_bytes = 0, cubin_bytes = 0;
  std::string key;  // the key text: versions, target, template, tile config, canonical spec
};

struct CompileCacheSummary {
  std::string dir;
  size_t entries = 0;
  uint64_t bytes = 0;
  uint64_t max_bytes = 0;  // least recently used entries are evicted beyond it
};

struct CacheListing {
  std::string cache_dir;
  std::string tuning_dir;
  std::vector<CacheGpu> gpus;         // every GPU identity with a tuning file, sorted by identity
  std::vector<CachedTuning> tunings;  // grouped in the order of `gpus`
  CompileCacheSummary kernels;
  // Why a cache folder's entries are not listed: one that another user could write is never loaded
  // from (as ssh ignores a key others can read), so its entries are not shown as if they were usable;
  // each reason says how to fix the folder (also logged as a warning, as the loaders do).
  std::vector<std::string> untrusted;
};

// What find_cache_entry found: a tuning, else a compiled kernel, else why neither.
struct CacheEntry {
  std::optional<CachedTuning> tuning;
  std::optional<CachedKernel> kernel;
  std::string missing;  // when neither: no id or hash starts with the prefix, or several do
  bool found() const { return tuning || kernel; }
};

struct CacheClearSummary {
  std::string dir;
  size_t tuning_files = 0;  // tuning files, including ones moved aside as corrupt
  size_t kernels = 0;
};

struct TuningImportSummary {
  size_t gpus = 0;      // GPU identities in the imported file
  size_t added = 0;     // keys the cache did not have
  size_t replaced = 0;  // the imported entry was faster
  size_t kept = 0;      // the cached entry was as fast or faster
};

// Every stored tuning and the compile cache's size. Unreadable tuning files are moved aside with a
// warning (never deleted). A folder that is not trusted is skipped, its reason in `untrusted`.
// Error(usage) when FLASHJIT_CACHE_MAX_BYTES is not a size.
FLASHJIT_API CacheListing list_cache(const std::string& dir = "");

// The tuning whose id starts with `prefix`, else the compiled kernel whose hash does; entries of a
// folder that is not trusted are not found (`missing` says why). Error(usage) for an empty prefix.
FLASHJIT_API CacheEntry find_cache_entry(const std::string& prefix, const std::string& dir = "");

// Deletes every tuning file (and the ones moved aside) and every compiled kernel.
FLASHJIT_API CacheClearSummary clear_cache(const std::string& dir = "");

// Every GPU identity's tunings as one YAML document, the form import_tunings reads (none from a
// tuning folder that is not trusted: an export must not pass on what flashjit would not use).
FLASHJIT_API std::string export_tunings(const std::string& dir = "");
// The same, written to `path` through a temp file and rename. Error(usage) when it cannot be written.
FLASHJIT_API void export_tunings_to_file(const std::string& path, const std::string& dir = "");

// Merges an export: for the same GPU identity, key and flashjit version, the entry with the smaller
// median wins. The whole file is checked before anything is written; Error(usage) names the file
// and the bad field, or says that the file does not exist.
FLASHJIT_API TuningImportSummary import_tunings(const std::string& path, const std::string& dir = "");

// The listing as one JSON object (what `flashjit cache list --json` prints):
// {"cache_dir", "tuning": [tuning...], "kernels": {"dir", "count", "bytes", "max_bytes"},
//  "untrusted": [reason...]}.
FLASHJIT_API std::string cache_listing_json(const CacheListing& listing);
// The entry found as one JSON object (what `flashjit cache show --json` prints). Error(usage) when
// nothing was found.
FLASHJIT_API std::string cache_entry_json(const CacheEntry& entry);

}  // namespace flashjit

// What a tuning result is filed under: the GPU identity (one file each), the shape bucket and the
// spec hash (the key inside the file), plus the records themselves and tile-config names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace flashjit::autotune {

// "bm64_bn64_w4_s2" (the same text as TileConfig::str(), which lives in the compiler library).
std::string config_name(const TileConfig& c);
// Inverse of config_name; nullopt when `text` is not of that form.
std::optional<TileConfig> parse_config_name(std::string_view text);
inline bool same_config(const TileConfig& a, const TileConfig& b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.num_warps == b.num_warps && a.num_stages == b.num_stages;
}

// Tunings are only valid on the same GPU model, SM count, compute capability and driver: a new
// driver can change ptxas and thus the best tile, so it starts a new file.
struct GpuIdentity {
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  int driver_version = 0;
  bool operator==(const GpuIdentity&) const = default;
  std::string str() const;  // "NVIDIA H200, 132 SMs, cc 9.0, driver 13000"
  // A file name stem of [A-Za-z0-9._-] only, readable and unique per identity:
  // "NVIDIA_H200-132sm-cc90-drv13000-<12 hex digits of SHA-256 of the identity>".
  std::string file_stem() const;
};
inline GpuIdentity gpu_identity(const DeviceInfo& d) {
  return {d.name, d.sm_count, d.cc_major, d.cc_minor, d.driver_version};
}

// Smallest power of two >= n (n <= 1 → 1).
int64_t round_up_pow2(int64_t n);

// Shapes that share a tuning: sequence lengths and batch×heads rounded up to powers of two; head
// dims exact (they change the kernel itself); the GQA group heads_q / heads_kv exact, since packing
// a group into a CTA's rows divides the CTA count by it (a split count tuned for 8 packed CTAs is
// wrong for 32 unpacked ones).
struct ShapeBucket {
  int64_t seq_q = 0, seq_kv = 0, batch_heads = 0;
  int d_qk = 0, d_v = 0;
  int64_t group = 1;
  // A paged K/V cache's page size (rows); 0: contiguous K/V. Paged launches are tuned on pages of
  // their size laid out as a serving allocator leaves them (shuffled): which key tile is fastest
  // differs between a contiguous cache and 16-row pages (docs/perf-notes.md §20).
  int page_size = 0;
  bool operator==(const ShapeBucket&) const = default;
  static ShapeBucket of(int64_t batch, int64_t heads_q, int64_t seq_q, int64_t seq_kv, int d_qk, int d_v,
                        int64_t heads_kv = 0);
  // "sq4096_skv4096_bh64_d128x128", with "_g4" appended for a group of 4 and "_p16" for 16-row pages
  std::string str() const;
};

struct TuningKey {
  std::string spec_hash;  // hash of the spec's canonical text (the caller's choice of hash)
  ShapeBucket bucket;
  bool operator==(const TuningKey&) const = default;
  std::string str() const;  // "<spec_hash>/<bucket>"
};

// One row of the runner-up table: a measured config, or one that failed and why.
struct TrialRecord {
  TileConfig config;
  bool ok = false;
  double median_ms = 0;
  std::string failure;  // when !ok
};

struct TuningEntry {
  std::string spec_name;
  TileConfig best;
  double median_ms = 0, p20_ms = 0, p80_ms = 0;
  std::vector<TrialRecord> runners_up;
  std::string date;              // ISO 8601 UTC; store() stamps it when empty
  std::string flashjit_version;  // set by TuningCache::store
  std::string mode;              // "quick" | "full" (informational)
  // Split-KV pieces per row that ran fastest with `best` (forward, decode-like buckets): 0 = the
  // runtime's automatic count (FlashAttention-2's rule), else 1..128.
  int num_splits = 0;
};

struct TuningRecord {
  TuningKey key;
  TuningEntry entry;
};

// The contents of one GPU identity's file.
struct TuningFile {
  GpuIdentity gpu;
  std::vector<TuningRecord> records;
};

// A short stable id for `flashjit cache show`: 12 hex digits of SHA-256(identity|key|version).
std::string record_id(const GpuIdentity& gpu, const TuningRecord& record);

}  // namespace flashjit::autotune

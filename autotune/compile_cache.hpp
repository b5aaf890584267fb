// The compile cache: PTX + cubin + launch metadata on disk under <cache_dir>/kernels/, one file per
// kernel, content-addressed by SHA-256 of the caller's key text, bounded in size by LRU eviction.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/kernel_entry.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit::autotune {

constexpr uint64_t kDefaultCompileCacheBytes = uint64_t(1) << 30;  // 1 GiB

// "1073741824", "512MiB", "1GiB", "64K"... (K/M/G/T = KiB/MiB/GiB/TiB; an optional "iB"/"B").
// Throws Error(usage) naming `what` (e.g. the knob) and the text when it is not a size.
uint64_t parse_byte_size(std::string_view text, std::string_view what);

struct CachedKernelFile {
  std::string hash;       // SHA-256 of the key text: the file name without ".fjk"
  std::string path;
  uint64_t bytes = 0;
  timespec last_used{};   // the file's mtime (set on every put and hit)
};

struct CompileCacheStats {
  size_t entries = 0;
  uint64_t bytes = 0;
  uint64_t max_bytes = 0;
};

// Safe across threads and processes: entries are written through a temp file + rename, so a reader
// sees a whole entry or none; eviction runs under an flock so two processes do not evict twice.
// A damaged, foreign-version or mismatched file is a miss with one warning; the next put of that
// key replaces it (rename over it). Nothing here throws on bad cache contents.
class CompileCache {
 public:
  // Entries live in `cache_root`/kernels; `max_bytes` bounds the sum of entry sizes.
  explicit CompileCache(std::string cache_root, uint64_t max_bytes = kDefaultCompileCacheBytes);

  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }
  static std::string hash_key(std::string_view key_text);  // 64 hex digits
  std::string path_for(std::string_view key_text) const;

  // The entry stored under exactly `key_text`, or nullopt. A hit marks the entry most recently used.
  std::optional<KernelArtifacts> get(std::string_view key_text) const;
  // Stores (or replaces) the entry, then evicts least recently used entries beyond max_bytes.
  // A write failure (read-only folder, disk full) is logged as a warning and returns false: a
  // cache that cannot be written must not fail the compile that produced the kernel.
  bool put(std::string_view key_text, KernelArtifacts artifacts) const;

  // Every *.fjk file, least recently used first.
  std::vector<CachedKernelFile> list() const;
  CompileCacheStats stats() const;
  // The decoded entry whose hash starts with `hash_prefix` (for `flashjit cache show`); throws
  // Error(usage) when none or several match or when the file is not a valid entry.
  DecodedKernelEntry read_by_hash_prefix(std::string_view hash_prefix) const;
  // Removes every entry; returns how many.
  size_t clear() const;
  // Deletes least recently used entries until the total is at most max_bytes; returns how many.
  size_t evict() const;

 private:
  std::string dir_;
  uint64_t max_bytes_;
};

}  // namespace flashjit::autotune

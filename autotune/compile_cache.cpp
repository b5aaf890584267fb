#include "autotune/compile_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "autotune/cache_trust.hpp"
#include "autotune/durable_file.hpp"
#include "support/hash.hpp"
#include "support/knobs.hpp"
#include "support/log.hpp"

namespace fs = std::filesystem;

namespace flashjit::autotune {
namespace {

constexpr const char* kSuffix = ".fjk";
constexpr int64_t kStaleTempSeconds = 3600;  // a temp file this old belongs to a crashed writer

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool older(const timespec& a, const timespec& b) {
  return a.tv_sec != b.tv_sec ? a.tv_sec < b.tv_sec : a.tv_nsec < b.tv_nsec;
}

// Scans the folder; also removes temp files that crashed writers left behind.
std::vector<CachedKernelFile> scan(const std::string& dir) {
  std::vector<CachedKernelFile> out;
  std::error_code ec;
  const time_t now = std::time(nullptr);
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::string path = it->path().string();
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // raced with an unlink
    if (name[0] == '.') {
      if (name.find(".tmp.") != std::string::npos && now - st.st_mtime > kStaleTempSeconds) ::unlink(path.c_str());
      continue;
    }
    if (!ends_with(name, kSuffix)) continue;
    out.push_back({name.substr(0, name.size() - std::strlen(kSuffix)), path, uint64_t(st.st_size), st.st_mtim});
  }
  std::sort(out.begin(), out.end(), [](const CachedKernelFile& a, const CachedKernelFile& b) {
    if (older(a.last_used, b.last_used)) return true;
    if (older(b.last_used, a.last_used)) return false;
    return a.hash < b.hash;
  });
  return out;
}

}  // namespace

uint64_t parse_byte_size(std::string_view text, std::string_view what) { return knob::parse_size(text, what); }

CompileCache::CompileCache(std::string cache_root, uint64_t max_bytes)
    : dir_(std::move(cache_root) + "/kernels"), max_bytes_(max_bytes) {}

std::string CompileCache::hash_key(std::string_view key_text) { return sha256_hex(key_text); }

std::string CompileCache::path_for(std::string_view key_text) const {
  return dir_ + "/" + hash_key(key_text) + kSuffix;
}

std::optional<KernelArtifacts> CompileCache::get(std::string_view key_text) const {
  if (!cache_folder_trusted(dir_)) return std::nullopt;
  const std::string path = path_for(key_text);
  ReadResult r = read_file_status(path);
  if (r.status == ReadResult::Status::missing) {
    log::debug("compile cache miss: " + path);
    return std::nullopt;
  }
  auto miss = [&](const std::string& why) {
    log::warn("compile cache: ignoring " + path + ": " + why + "; treated as a miss, the next compile replaces it");
    return std::nullopt;
  };
  if (r.status == ReadResult::Status::error) return miss(r.error);
  DecodeResult d = decode_kernel_entry(r.content);
  if (!d.entry) return miss(d.error);
  // The file name is a hash; the full key inside decides. Equal hashes with different keys would
  // be a SHA-256 collision, or more likely a file copied in from elsewhere.
  if (d.entry->key_text != key_text) return miss("it holds a different key than its name says");
  // LRU clock: the mtime. utimensat(2) with an explicit time (not UTIME_NOW, whose kernel clock
  // is jiffy-coarse). Failure (a read-only cache) only costs LRU precision.
  timespec now = now_realtime();
  timespec times[2] = {now, now};
  ::utimensat(AT_FDCWD, path.c_str(), times, 0);
  log::debug("compile cache hit: " + path);
  return std::move(d.entry->artifacts);
}

bool CompileCache::put(std::string_view key_text, KernelArtifacts artifacts) const {
  if (artifacts.created_unix == 0) artifacts.created_unix = std::time(nullptr);
  const std::string path = path_for(key_text);
  try {
    std::string bytes = encode_kernel_entry(key_text, artifacts);
    if (bytes.size() > max_bytes_) {
      log::warn("compile cache: entry of " + std::to_string(bytes.size()) + " bytes exceeds the cache bound of " +
                std::to_string(max_bytes_) + " bytes (FLASHJIT_CACHE_MAX_BYTES); not stored");
      return false;
    }
    make_cache_dirs(dir_);
    if (!cache_folder_trusted(dir_)) return false;
    write_file_durable(path, bytes, now_realtime());
    log::debug("compile cache put: " + path + " (" + std::to_string(bytes.size()) + " bytes)");
  } catch (const Error& e) {
    log::warn(std::string("compile cache: cannot store ") + path + ": " + e.what());
    return false;
  }
  try {
    evict();
  } catch (const Error& e) {  // the entry is stored; only the bound could not be enforced this time
    log::warn(std::string("compile cache: cannot evict old entries: ") + e.what());
  }
  return true;
}

std::vector<CachedKernelFile> CompileCache::list() const { return scan(dir_); }

CompileCacheStats CompileCache::stats() const {
  CompileCacheStats s;
  s.max_bytes = max_bytes_;
  for (const auto& f : scan(dir_)) {
    ++s.entries;
    s.bytes += f.bytes;
  }
  return s;
}

DecodedKernelEntry CompileCache::read_by_hash_prefix(std::string_view prefix) const {
  std::vector<CachedKernelFile> hits;
  for (auto& f : scan(dir_))
    if (!prefix.empty() && f.hash.compare(0, prefix.size(), prefix) == 0) hits.push_back(f);
  if (hits.empty()) throw Error(ErrorKind::usage, "no compiled kernel in " + dir_ + " has a hash starting with '" + std::string(prefix) + "'");
  if (hits.size() > 1)
    throw Error(ErrorKind::usage, std::to_string(hits.size()) + " compiled kernels have a hash starting with '" +
                                      std::string(prefix) + "'; give more digits");
  ReadResult r = read_file_status(hits[0].path);
  if (r.status != ReadResult::Status::ok)
    throw Error(ErrorKind::usage, r.error.empty() ? "'" + hits[0].path + "' vanished (evicted?)" : r.error);
  DecodeResult d = decode_kernel_entry(r.content);
  if (!d.entry) throw Error(ErrorKind::usage, "'" + hits[0].path + "' is not a valid cache entry: " + d.error);
  return std::move(*d.entry);
}

size_t CompileCache::clear() const {
  size_t n = 0;
  for (auto& f : scan(dir_))
    if (::unlink(f.path.c_str()) == 0) ++n;
  return n;
}

size_t CompileCache::evict() const {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return 0;
  // One evictor at a time across processes (flock(2)); without it two processes could each
  // delete a different "oldest" file and shrink the cache below the bound for no reason.
  FileLock lock(dir_ + "/.lru.lock");
  std::vector<CachedKernelFile> files = scan(dir_);
  uint64_t total = 0;
  for (auto& f : files) total += f.bytes;
  size_t evicted = 0;
  for (auto& f : files) {
    if (total <= max_bytes_) break;
    // unlink(2) of a file another process is reading is safe: its open descriptor stays valid.
    if (::unlink(f.path.c_str()) == 0 || errno == ENOENT) {
      total -= f.bytes;
      ++evicted;
      log::debug("compile cache: evicted " + f.path + " (least recently used)");
    }
  }
  return evicted;
}

}  // namespace flashjit::autotune

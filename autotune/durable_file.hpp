// Crash- and concurrency-safe file primitives for the on-disk caches: atomic durable writes,
// reads that tell "missing" from "unreadable", and an exclusive flock on a sidecar lock file.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "support/file_read.hpp"

namespace flashjit::autotune {

// write_file_atomic (support/atomic_file.hpp) as the caches need it: the folder fsync'ed after the
// rename, so an entry survives a crash once this returns; mode 0644; `mtime`, when given, stamped
// on the file before the rename (the compile cache's LRU clock). Readers see the old file or the
// new one, never a mix. Throws Error(usage) naming the path and the errno text; the temp file is
// removed on failure.
void write_file_durable(const std::string& path, std::string_view content,
                        std::optional<timespec> mtime = std::nullopt);

struct ReadResult {
  enum class Status { ok, missing, error } status = Status::missing;
  std::string content;  // when ok
  std::string error;    // when error: "cannot read 'PATH': <strerror>"
};
// Reads a whole file of at most `limit` bytes (support/file_read.hpp). ENOENT is `missing`; any
// other failure, and a larger file, is `error` (never throws).
ReadResult read_file_status(const std::string& path, size_t limit = kMaxModuleBytes);

// CLOCK_REALTIME with nanoseconds: file timestamps taken by the kernel itself are only
// jiffy-granular (current_time() uses the coarse clock), too coarse to order cache hits.
timespec now_realtime();

// An exclusive advisory lock held for the object's lifetime. flock(2) locks belong to the open
// file description, so each FileLock opens the lock file itself, and the lock is released when
// the descriptor closes — also when the process dies, so a crashed writer never leaves the cache
// locked. The lock file is never deleted: unlinking it while another process waits on the old
// inode would let two processes "hold" the lock at once.
class FileLock {
 public:
  explicit FileLock(const std::string& lock_path);  // blocks until acquired; throws Error(usage)
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace flashjit::autotune

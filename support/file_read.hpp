// The one way flashjit reads a file it did not write itself in this process (specs, imports,
// overrides, cache entries): with a size limit enforced while reading, so that /dev/zero, a FIFO
// that never ends or a huge file costs at most `limit` bytes of memory.
#pragma once

#include <cstddef>
#include <string>

namespace flashjit {

// A spec is text a person writes; 1 MiB is far beyond any real one.
inline constexpr size_t kMaxSpecBytes = size_t(1) << 20;
// `cache import` files: an export holds a few hundred bytes per tuning entry, so 16 MiB is tens
// of thousands of entries.
inline constexpr size_t kMaxImportBytes = size_t(16) << 20;
// Override files (LLVM IR or PTX of one module) and compile-cache entries (PTX + cubin).
inline constexpr size_t kMaxModuleBytes = size_t(256) << 20;

struct BoundedRead {
  enum class Status { ok, missing, error, too_large } status = Status::missing;
  std::string content;  // when ok
  std::string error;    // when error or too_large: "'PATH' ..." with the reason
};

// Reads at most `limit` bytes of `path` (symlinks followed; a FIFO is read until its writer closes
// it). ENOENT is `missing`; a directory, a socket or a read error is `error`; more than `limit`
// bytes is `too_large`, found by reading one byte past the limit (st_size is not trusted: it is 0
// for /dev/zero and /proc files). Never throws.
BoundedRead read_file_bounded(const std::string& path, size_t limit);

// "1 MiB", "16 MiB", "300 bytes": a limit as the messages say it.
std::string size_limit_text(size_t bytes);

}  // namespace flashjit

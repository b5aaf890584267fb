// The one way flashjit writes a file: outputs (`compile -o`, `cache export`), stage dumps and the
// on-disk caches all go through write_file_atomic.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace flashjit {

struct AtomicWriteOptions {
  // fsync the folder after the rename, so that the new name itself survives a crash (the caches).
  bool sync_dir = false;
  // Stamped on the file before the rename (the compile cache's LRU clock).
  std::optional<timespec> mtime;
  // The file's permissions; by default those of the file replaced, or 0666 & ~umask for a new one.
  std::optional<mode_t> mode;
};

// Writes `content` to `path` so that readers see the old file or the new one, never a mix, and a
// crash never leaves `path` naming a partial file:
//  - a regular file (or none) is replaced by a temp file made with mkstemp(3) (O_CREAT|O_EXCL, so a
//    file or symlink planted at a guessed name is never written through) in the same folder,
//    written, fsync'ed and renamed over `path` (rename(2): "If newpath already exists, it will be
//    atomically replaced");
//  - a symlink is written through as cp(1) does: the file it resolves to is replaced in that
//    file's folder and the link stays; a dangling link is refused;
//  - an existing device or FIFO (/dev/null, a pipe) is opened and written in place, never replaced;
//  - a directory or socket is refused.
// Throws Error(usage) naming the path and the errno text; a temp file is removed on failure.
void write_file_atomic(const std::string& path, std::string_view content, const AtomicWriteOptions& options = {});

}  // namespace flashjit

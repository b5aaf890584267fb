#include "autotune/durable_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "flashjit/flashjit.hpp"
#include "support/atomic_file.hpp"

namespace flashjit::autotune {
namespace {

std::string errno_text() { return std::strerror(errno); }

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw Error(ErrorKind::usage, what + " '" + path + "': " + errno_text());
}

}  // namespace

void write_file_durable(const std::string& path, std::string_view content, std::optional<timespec> mtime) {
  // 0644 whatever the umask or the file replaced: the cache is meant to be readable like any
  // other file of the user.
  write_file_atomic(path, content, {.sync_dir = true, .mtime = mtime, .mode = 0644});
}

ReadResult read_file_status(const std::string& path, size_t limit) {
  BoundedRead b = read_file_bounded(path, limit);
  ReadResult r;
  if (b.status == BoundedRead::Status::missing) return r;
  if (b.status == BoundedRead::Status::ok) {
    r.status = ReadResult::Status::ok;
    r.content = std::move(b.content);
    return r;
  }
  r.status = ReadResult::Status::error;
  r.error = b.error;
  return r;
}

timespec now_realtime() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ts;
}

FileLock::FileLock(const std::string& lock_path) {
  // O_NOFOLLOW: a symlink planted at the lock's name would make us create a file wherever it points
  // (open(2): "If the trailing component of pathname is a symbolic link, then the open fails, with
  // the error ELOOP"); O_NONBLOCK: a FIFO planted there must not hang the open.
  fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd_ < 0 && errno == ELOOP)
    throw Error(ErrorKind::usage, "cannot open the lock file '" + lock_path +
                                      "': it is a symbolic link; remove it (flashjit creates the lock file itself)");
  if (fd_ < 0) fail("cannot open the lock file", lock_path);
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw Error(ErrorKind::usage, "the lock file '" + lock_path + "' is not a regular file; remove it");
  }
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    std::string why = errno_text();
    ::close(fd_);
    throw Error(ErrorKind::usage, "cannot lock '" + lock_path + "': " + why);
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // close(2) releases the flock
}

}  // namespace flashjit::autotune

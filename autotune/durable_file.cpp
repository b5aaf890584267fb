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

ReadResult read_file_status(const std::string& path) {
  ReadResult r;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return r;
    r.status = ReadResult::Status::error;
    r.error = "cannot read '" + path + "': " + errno_text();
    return r;
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) r.content.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r.status = ReadResult::Status::error;
      r.error = "cannot read '" + path + "': " + errno_text();
      r.content.clear();
      ::close(fd);
      return r;
    }
    if (n == 0) break;
    r.content.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  r.status = ReadResult::Status::ok;
  return r;
}

timespec now_realtime() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return ts;
}

FileLock::FileLock(const std::string& lock_path) {
  fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot open the lock file", lock_path);
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

#include "autotune/durable_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "flashjit/flashjit.hpp"

namespace flashjit::autotune {
namespace {

std::string errno_text() { return std::strerror(errno); }

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw Error(ErrorKind::usage, what + " '" + path + "': " + errno_text());
}

// write(2) may write fewer bytes than asked (signals, quotas); loop until all are written.
bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void fsync_dir(const std::string& dir) {
  // fsync(2): "Calling fsync() does not necessarily ensure that the entry in the directory
  // containing the file has also reached disk. For that an explicit fsync() on a file descriptor
  // for the directory is also needed." Best effort: some filesystems refuse O_RDONLY dirs.
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void write_file_durable(const std::string& path, std::string_view content, std::optional<timespec> mtime) {
  std::filesystem::path p(path);
  std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  // mkstemp(3) makes a unique name even for several threads of one process (a pid suffix does not).
  std::string tmpl = dir + "/." + p.filename().string() + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0) fail("cannot create a temp file in", dir);
  auto abandon = [&](const std::string& what) {
    std::string why = errno_text();
    ::close(fd);
    ::unlink(tmpl.c_str());
    throw Error(ErrorKind::usage, what + " '" + tmpl + "': " + why);
  };
  // mkstemp creates 0600; the cache is meant to be readable like any other file of the user.
  if (::fchmod(fd, 0644) != 0) abandon("cannot chmod");
  if (!write_all(fd, content)) abandon("cannot write (disk full?)");
  if (mtime) {
    timespec times[2] = {*mtime, *mtime};
    if (::futimens(fd, times) != 0) abandon("cannot set the time of");
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at an empty file.
  if (::fsync(fd) != 0) abandon("cannot fsync");
  if (::close(fd) != 0) {
    std::string why = errno_text();
    ::unlink(tmpl.c_str());
    throw Error(ErrorKind::usage, "cannot close '" + tmpl + "': " + why);
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    std::string why = errno_text();
    ::unlink(tmpl.c_str());
    throw Error(ErrorKind::usage, "cannot rename '" + tmpl + "' to '" + path + "': " + why);
  }
  fsync_dir(dir);
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

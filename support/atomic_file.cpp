#include "support/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "flashjit/flashjit.hpp"

namespace flashjit {
namespace {

std::string errno_text() { return std::strerror(errno); }

[[noreturn]] void fail(const std::string& what, const std::string& path, const std::string& why) {
  throw Error(ErrorKind::usage, what + " '" + path + "': " + why);
}

// write(2) may write fewer bytes than asked (signals, quotas); loop until all are written.
bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string name_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// umask(2) can only be read by setting it, which races with other threads; proc(5) reports it as
// the "Umask" line of /proc/self/status (Linux 4.7 and later).
mode_t current_umask() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("Umask:", 0) == 0) return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8));
  return 022;
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

// Replaces the regular file (or nothing) at `path` by a new file: temp file, fsync, rename.
void replace(const std::string& path, std::string_view content, const AtomicWriteOptions& options,
             std::optional<mode_t> old_mode) {
  const std::string dir = folder_of(path);
  // mkstemp(3) opens with O_CREAT|O_EXCL a name unique even among the threads of one process, so
  // nothing planted at a guessed name is followed; mkostemp adds O_CLOEXEC for ptxas' popen.
  std::string tmp = dir + "/." + name_of(path) + ".tmp.XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) fail("cannot create a temp file in", dir, errno_text());
  auto abandon = [&](const std::string& what) {
    const std::string why = errno_text();
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(what, tmp, why);
  };
  // mkstemp creates the file 0600; the result is meant to be readable like any other file of the user.
  const mode_t mode = options.mode ? *options.mode : old_mode ? *old_mode : 0666 & ~current_umask();
  if (::fchmod(fd, mode) != 0) abandon("cannot chmod");
  if (!write_all(fd, content)) abandon("cannot write");
  if (options.mtime) {
    const timespec times[2] = {*options.mtime, *options.mtime};
    if (::futimens(fd, times) != 0) abandon("cannot set the time of");
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at an empty file.
  if (::fsync(fd) != 0) abandon("cannot fsync");
  if (::close(fd) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    fail("cannot close", tmp, why);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw Error(ErrorKind::usage, "cannot rename '" + tmp + "' to '" + path + "': " + why);
  }
  if (options.sync_dir) fsync_dir(dir);
}

// Writes into an existing device or FIFO as a shell redirection does: no O_CREAT, no O_TRUNC.
// False when `path` turned out to be a regular file after all (replaced since it was looked at).
bool write_in_place(const std::string& path, std::string_view content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) fail("cannot open", path, errno_text());
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    ::close(fd);
    return false;
  }
  if (!write_all(fd, content)) {
    const std::string why = errno_text();
    ::close(fd);
    fail("cannot write", path, why);
  }
  if (::close(fd) != 0) fail("cannot close", path, errno_text());
  return true;
}

}  // namespace

void write_file_atomic(const std::string& path, std::string_view content, const AtomicWriteOptions& options) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) fail("cannot write", path, errno_text());
    replace(path, content, options, std::nullopt);
    return;
  }
  std::string target = path;
  if (S_ISLNK(st.st_mode)) {
    // As cp(1): write to the file the link resolves to, in that file's folder, and keep the link.
    char* real = ::realpath(path.c_str(), nullptr);
    if (!real && errno == ENOENT)
      throw Error(ErrorKind::usage, "not writing through the dangling symlink '" + path + "'");
    if (!real) fail("cannot resolve the symlink", path, errno_text());
    target = real;
    std::free(real);
    if (::stat(target.c_str(), &st) != 0) fail("cannot write", target, errno_text());
  }
  if (S_ISREG(st.st_mode)) return replace(target, content, options, st.st_mode & 0777);
  if (S_ISDIR(st.st_mode)) throw Error(ErrorKind::usage, "cannot write '" + path + "': it is a directory");
  if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode) && !S_ISFIFO(st.st_mode))
    throw Error(ErrorKind::usage, "cannot write '" + path + "': not a regular file, device or FIFO");
  // A device or FIFO is never replaced: renaming over /dev/null would turn it into a plain file.
  if (!write_in_place(target, content)) replace(target, content, options, std::nullopt);
}

}  // namespace flashjit

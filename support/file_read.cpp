#include "support/file_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace flashjit {

std::string size_limit_text(size_t bytes) {
  if (bytes >= (size_t(1) << 20) && bytes % (size_t(1) << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

BoundedRead read_file_bounded(const std::string& path, size_t limit) {
  BoundedRead r;
  auto fail = [&](BoundedRead::Status s, const std::string& why) {
    r.status = s;
    r.content.clear();
    r.error = "'" + path + "' " + why;
    return r;
  };
  // O_NOCTTY: a terminal device named by mistake must not become the controlling terminal.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) return r;
    return fail(BoundedRead::Status::error, std::string("cannot be read: ") + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode) || S_ISSOCK(st.st_mode)) {
    const std::string why = S_ISDIR(st.st_mode) ? "is a directory, not a file" : "is not a readable file";
    ::close(fd);
    return fail(BoundedRead::Status::error, why);
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > limit) {
    ::close(fd);
    return fail(BoundedRead::Status::too_large, "is " + std::to_string(st.st_size) + " bytes; the limit is " +
                                                    size_limit_text(limit));
  }
  char buf[1 << 16];
  while (r.content.size() <= limit) {
    const size_t want = std::min(sizeof buf, limit + 1 - r.content.size());
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return fail(BoundedRead::Status::error, "cannot be read: " + why);
    }
    if (n == 0) break;
    r.content.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (r.content.size() > limit)
    return fail(BoundedRead::Status::too_large, "is larger than the limit of " + size_limit_text(limit) +
                                                    " (reading stopped there)");
  r.status = BoundedRead::Status::ok;
  return r;
}

}  // namespace flashjit

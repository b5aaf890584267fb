#include "autotune/cache_trust.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>

#include "flashjit/flashjit.hpp"
#include "support/log.hpp"

namespace flashjit::autotune {

namespace {

std::string octal(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

// Why one existing folder is not trusted, or "".
std::string check_one(const std::string& folder) {
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) return "";  // not there yet: created by us, below
  if (!S_ISDIR(st.st_mode)) return folder + " is not a folder";
  const uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0)
    return folder + " is owned by uid " + std::to_string(st.st_uid) + ", not by you (uid " + std::to_string(me) +
           "); use a cache of your own (FLASHJIT_CACHE_DIR) or `chown " + std::to_string(me) + " " + folder + "`";
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0)
    return folder + " is writable by " + ((st.st_mode & S_IWOTH) ? "every user" : "its group") + " (mode " +
           octal(st.st_mode) + "); fix it with `chmod go-w " + folder + "`";
  return "";
}

// The folder above `folder`, named as a user would type it in the chmod the message suggests
// ("/c/tuning" -> "/c"); `folder`/.. when the last component is not a plain name.
std::string parent_of(const std::string& folder) {
  std::string f = folder;
  while (f.size() > 1 && f.back() == '/') f.pop_back();
  const size_t slash = f.rfind('/');
  const std::string last = slash == std::string::npos ? f : f.substr(slash + 1);
  if (slash == std::string::npos || last.empty() || last == "." || last == "..") return folder + "/..";
  return slash == 0 ? "/" : f.substr(0, slash);
}

}  // namespace

std::string untrusted_cache_folder(const std::string& folder) {
  if (std::string why = check_one(folder); !why.empty()) return why;
  return check_one(parent_of(folder));
}

bool cache_folder_trusted(const std::string& folder) {
  const std::string why = untrusted_cache_folder(folder);
  if (why.empty()) return true;
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(folder).second)
    log::warn("cache: " + why + "; nothing is loaded from or stored in " + folder + " until then");
  return false;
}

void make_cache_dirs(const std::string& folder) {
  for (size_t at = 1; at <= folder.size(); ++at) {
    if (at != folder.size() && folder[at] != '/') continue;
    const std::string part = folder.substr(0, at);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      throw Error(ErrorKind::usage, "cannot create directory '" + part + "': " + std::strerror(errno));
  }
}

}  // namespace flashjit::autotune

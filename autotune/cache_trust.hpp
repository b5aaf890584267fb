// Whether a cache folder may be loaded from. Compiled kernels are code that runs on the GPU, and a
// tuning picks the code that is compiled: like ssh with ~/.ssh (sshd_config(5), StrictModes), a
// cache that another user could have written is refused, not trusted.
#pragma once

#include <string>

namespace flashjit::autotune {

// "" when `folder` and the cache root above it (`folder`/..) are each owned by this user (or root)
// and writable by nobody else (no group or other write bit, or the sticky bit set); a folder that
// does not exist yet is fine. Otherwise why not, with the chmod/chown that fixes it.
std::string untrusted_cache_folder(const std::string& folder);

// untrusted_cache_folder, logged as a warning once per folder and process; true when trusted.
bool cache_folder_trusted(const std::string& folder);

// Creates `folder` and missing parents as 0755 (then masked by the umask): never group- or
// other-writable, whatever the umask, so that the check above accepts what flashjit creates.
// Throws Error(usage) naming the folder.
void make_cache_dirs(const std::string& folder);

}  // namespace flashjit::autotune

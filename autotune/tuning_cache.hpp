// The tuning cache: the best tile config per (GPU identity, spec, shape bucket), one YAML file per
// GPU identity under <cache_dir>/tuning/, merged by concurrent writers under an flock.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autotune/tuning_key.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit::autotune {

struct ImportSummary {
  size_t gpus = 0;
  size_t added = 0;     // keys the cache did not have
  size_t replaced = 0;  // the imported entry was faster
  size_t kept = 0;      // the cached entry was as fast or faster
};

// Readers never lock: files are replaced whole by rename(2), so a reader sees the old or the new
// file. Writers lock `<file>.lock` (flock(2), LOCK_EX), re-read the file, merge their change and
// rename a new file in, so concurrent processes lose no entries. A file that cannot be parsed (bad
// YAML, an older schema, a malformed entry) is renamed to `<file>.corrupt-<UTC time>` with a
// warning — kept for inspection, never deleted — and a fresh file is started. A valid file that is
// not ours to use — a newer schema (a newer flashjit sharing the cache) or another GPU identity's
// contents — is foreign: left in place and unchanged, a warning, nothing used from it, and a
// store into it fails with Error(usage) instead of overwriting it.
class TuningCache {
 public:
  // Files live in `cache_root`/tuning. Entries carry the flashjit version that measured them and
  // lookup() only returns entries of `flashjit_version`: a new release may generate other code.
  TuningCache(std::string cache_root, std::string flashjit_version);

  const std::string& dir() const { return dir_; }
  std::string path_for(const GpuIdentity& gpu) const;

  std::optional<TuningEntry> lookup(const GpuIdentity& gpu, const TuningKey& key) const;
  // Stores the entry for (gpu, key, this version), replacing an older measurement of the same key:
  // the newest tuning wins locally (import, instead, keeps the faster). Stamps version and date.
  // Throws Error(usage) when the folder or file cannot be written.
  void store(const GpuIdentity& gpu, const TuningKey& key, TuningEntry entry) const;

  // Every GPU identity's file (unreadable ones are moved aside with a warning), sorted by identity.
  std::vector<TuningFile> load_all() const;
  // Removes every tuning file and every moved-aside one; returns how many files went.
  size_t clear() const;

  // All identities as one YAML document.
  std::string export_yaml() const;
  // Merges an export: for the same GPU identity, key and flashjit version, the entry with the
  // smaller median time wins. The whole text is validated before anything is written; throws
  // Error(usage) naming `where` and the bad field.
  ImportSummary import_yaml(std::string_view text, std::string_view where) const;

 private:
  // Reads and parses `path`; a bad file is moved aside (under the lock) and reads as empty.
  // `locked` says whether the caller already holds the file's lock. A foreign file reads as empty
  // and, when `foreign` is given, sets it to why the file is not ours.
  std::optional<TuningFile> read(const std::string& path, const GpuIdentity* expect, bool locked,
                                 std::string* foreign = nullptr) const;
  // Under the lock of `path`: its file for `gpu` (empty when missing or moved aside); throws
  // Error(usage) when the file is foreign, so that a writer never replaces it.
  TuningFile read_for_update(const std::string& path, const GpuIdentity& gpu) const;
  void move_aside(const std::string& path, const std::string& why) const;

  std::string dir_;
  std::string version_;
};

}  // namespace flashjit::autotune

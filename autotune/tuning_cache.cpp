#include "autotune/tuning_cache.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "autotune/cache_trust.hpp"
#include "autotune/durable_file.hpp"
#include "autotune/tuning_yaml.hpp"
#include "support/clock.hpp"
#include "support/log.hpp"

namespace fs = std::filesystem;

namespace flashjit::autotune {
namespace {

std::string lock_path(const std::string& path) { return path + ".lock"; }

// Writers create the folder as make_cache_dirs does and write only into a trusted one.
void ensure_dir(const std::string& dir) {
  make_cache_dirs(dir);
  if (std::string why = untrusted_cache_folder(dir); !why.empty())
    throw Error(ErrorKind::usage, "tuning cache: " + why + "; nothing is stored there until then");
}

bool same_slot(const TuningRecord& a, const TuningRecord& b) {
  return a.key == b.key && a.entry.flashjit_version == b.entry.flashjit_version;
}

}  // namespace

TuningCache::TuningCache(std::string cache_root, std::string flashjit_version)
    : dir_(std::move(cache_root) + "/tuning"), version_(std::move(flashjit_version)) {}

std::string TuningCache::path_for(const GpuIdentity& gpu) const { return dir_ + "/" + gpu.file_stem() + ".yaml"; }

void TuningCache::move_aside(const std::string& path, const std::string& why) const {
  // Nanoseconds make the name unique enough that two move-asides never collide.
  std::string aside = path + ".corrupt-" + utc_iso8601_basic_ns(now_realtime());
  if (::rename(path.c_str(), aside.c_str()) == 0)
    log::warn("tuning cache: " + why + "; moved it to " + aside + " and started a fresh file");
  else
    log::warn("tuning cache: " + why + "; it could not be moved aside (" + std::strerror(errno) +
              "), so it is ignored");
}

std::optional<TuningFile> TuningCache::read(const std::string& path, const GpuIdentity* expect, bool locked,
                                            std::string* foreign) const {
  ReadResult r = read_file_status(path, kMaxImportBytes);
  if (r.status == ReadResult::Status::missing) return std::nullopt;
  if (r.status == ReadResult::Status::error) {
    // Permissions and the like are not corruption: leave the file alone.
    log::warn("tuning cache: " + r.error + "; treated as empty");
    return std::nullopt;
  }
  std::string why;
  bool not_ours = false;
  try {
    TuningFile f = parse_tuning_file(r.content, path);
    if (!expect || f.gpu == *expect) return f;
    why = path + " holds the tunings of another GPU identity (" + f.gpu.str() + "), not of " + expect->str();
    not_ours = true;
  } catch (const Error& e) {
    const int schema = tuning_file_schema(r.content);
    not_ours = schema > kTuningSchemaVersion;
    why = !not_ours ? std::string(e.what())
                    : path + " was written by a newer flashjit (schema " + std::to_string(schema) +
                          ", this one reads schema " + std::to_string(kTuningSchemaVersion) + ")";
  }
  if (not_ours) {  // foreign, not corrupt: valid data of another flashjit or identity
    log::warn("tuning cache: " + why + "; left in place, nothing in it is used");
    if (foreign) *foreign = why;
    return std::nullopt;
  }
  if (locked) {
    move_aside(path, why);
    return std::nullopt;
  }
  // Re-check under the lock before moving: a writer may have replaced the file since we read it,
  // and moving its fresh file aside would lose its entries.
  try {
    FileLock lock(lock_path(path));
    return read(path, expect, true, foreign);
  } catch (const Error& e) {  // e.g. a read-only cache: still a miss, never an exception
    log::warn("tuning cache: " + why + "; it cannot be moved aside (" + e.what() + "), so it is ignored");
    return std::nullopt;
  }
}

TuningFile TuningCache::read_for_update(const std::string& path, const GpuIdentity& gpu) const {
  std::string foreign;
  std::optional<TuningFile> f = read(path, &gpu, true, &foreign);
  if (!foreign.empty()) throw Error(ErrorKind::usage, "tuning cache: " + foreign + "; not overwritten");
  return f.value_or(TuningFile{gpu, {}});
}

std::optional<TuningEntry> TuningCache::lookup(const GpuIdentity& gpu, const TuningKey& key) const {
  if (!cache_folder_trusted(dir_)) return std::nullopt;
  // Files named before the name carried a hash of the identity ("<stem>-drvN.yaml") are read as
  // well, never written: the tunings they hold stay usable, and read() still checks the identity.
  const std::string path = path_for(gpu);
  const std::string legacy = path.substr(0, path.size() - std::string("-0123456789ab.yaml").size()) + ".yaml";
  for (const std::string& p : {path, legacy}) {
    std::optional<TuningFile> f = read(p, &gpu, false);
    if (!f) continue;
    for (TuningRecord& r : f->records) {
      if (!(r.key == key)) continue;
      if (r.entry.flashjit_version == version_) return std::move(r.entry);
      log::debug("tuning cache: " + key.str() + " was tuned by flashjit " + r.entry.flashjit_version + ", this is " +
                 version_ + "; not used");
    }
  }
  return std::nullopt;
}

void TuningCache::store(const GpuIdentity& gpu, const TuningKey& key, TuningEntry entry) const {
  entry.flashjit_version = version_;
  if (entry.date.empty()) entry.date = utc_iso8601(std::time(nullptr));
  ensure_dir(dir_);
  const std::string path = path_for(gpu);
  FileLock lock(lock_path(path));
  TuningFile f = read_for_update(path, gpu);
  TuningRecord rec{key, std::move(entry)};
  auto it = std::find_if(f.records.begin(), f.records.end(), [&](const TuningRecord& r) { return same_slot(r, rec); });
  if (it != f.records.end())
    *it = std::move(rec);
  else
    f.records.push_back(std::move(rec));
  write_file_durable(path, emit_tuning_file(f));
}

std::vector<TuningFile> TuningCache::load_all() const {
  std::vector<TuningFile> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".yaml") != 0 || name[0] == '.') continue;
    if (auto f = read(it->path().string(), nullptr, false)) out.push_back(std::move(*f));
  }
  std::sort(out.begin(), out.end(), [](const TuningFile& a, const TuningFile& b) { return a.gpu.str() < b.gpu.str(); });
  return out;
}

size_t TuningCache::clear() const {
  size_t n = 0;
  std::error_code ec;
  std::vector<std::string> doomed;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    bool yaml = name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0 && name[0] != '.';
    if (yaml || name.find(".yaml.corrupt-") != std::string::npos) doomed.push_back(it->path().string());
  }
  for (const std::string& p : doomed) {
    // Under the writer lock so a concurrent store() does not resurrect half of what it read.
    // Lock files stay (see FileLock).
    bool is_yaml = p.size() > 5 && p.compare(p.size() - 5, 5, ".yaml") == 0;
    std::optional<FileLock> lock;
    if (is_yaml) lock.emplace(lock_path(p));
    if (::unlink(p.c_str()) == 0) ++n;
  }
  return n;
}

std::string TuningCache::export_yaml() const { return emit_tuning_export(load_all()); }

ImportSummary TuningCache::import_yaml(std::string_view text, std::string_view where) const {
  std::vector<TuningFile> incoming = parse_tuning_export(text, where);  // validate all before writing
  ImportSummary s;
  if (!incoming.empty()) ensure_dir(dir_);
  for (TuningFile& in : incoming) {
    ++s.gpus;
    const std::string path = path_for(in.gpu);
    FileLock lock(lock_path(path));
    // A foreign file stops the import with an error: it never claims entries it did not store.
    TuningFile f;
    try {
      f = read_for_update(path, in.gpu);
    } catch (const Error& e) {
      throw Error(ErrorKind::usage, std::string(e.what()) + "; import of " + std::string(where) + " stopped there, " +
                                        std::to_string(s.gpus - 1) + " of " + std::to_string(incoming.size()) +
                                        " GPU identities merged before it");
    }
    bool changed = false;
    for (TuningRecord& rec : in.records) {
      auto it = std::find_if(f.records.begin(), f.records.end(), [&](const TuningRecord& r) { return same_slot(r, rec); });
      if (it == f.records.end()) {
        f.records.push_back(std::move(rec));
        ++s.added;
        changed = true;
      } else if (rec.entry.median_ms < it->entry.median_ms) {
        *it = std::move(rec);
        ++s.replaced;
        changed = true;
      } else {
        ++s.kept;
      }
    }
    if (changed) write_file_durable(path, emit_tuning_file(f));
  }
  return s;
}

}  // namespace flashjit::autotune

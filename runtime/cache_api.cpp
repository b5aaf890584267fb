// The public cache API (include/flashjit/cache.hpp) over the on-disk formats in autotune/: the
// tuning cache, the compile cache and durable file writes.
#include "flashjit/cache.hpp"

#include <llvm/Support/JSON.h>

#include "autotune/cache_trust.hpp"
#include "autotune/compile_cache.hpp"
#include "autotune/durable_file.hpp"
#include "autotune/tuning_cache.hpp"
#include "runtime/kernel_cache.hpp"
#include "support/atomic_file.hpp"
#include "support/clock.hpp"
#include "support/json.hpp"

namespace flashjit {

namespace {

std::string root_or_default(const std::string& dir) { return dir.empty() ? cache_dir() : dir; }

// Whether the loaders would read `folder` (autotune/cache_trust.hpp); when not, the reason is added
// to `untrusted` (and warned once, as the loaders warn). What `cache list` and `cache show` present
// is then what flashjit uses: never entries it refuses to load.
bool trusted(const std::string& folder, std::vector<std::string>* untrusted) {
  if (autotune::cache_folder_trusted(folder)) return true;
  if (untrusted) untrusted->push_back(autotune::untrusted_cache_folder(folder) + "; its entries are not used");
  return false;
}

autotune::TuningCache tuning_cache(const std::string& root) { return {root, versions().flashjit}; }

autotune::CompileCache compile_cache(const std::string& root) {
  return autotune::CompileCache(root, rt::compile_cache_max_bytes());
}

CacheGpu gpu_of(const autotune::GpuIdentity& g) {
  return {g.name, g.sm_count, g.cc_major, g.cc_minor, g.driver_version, g.str()};
}

CachedTuning tuning_of(const autotune::GpuIdentity& g, const autotune::TuningRecord& r) {
  const autotune::TuningEntry& e = r.entry;
  const autotune::ShapeBucket& b = r.key.bucket;
  CachedTuning t;
  t.id = autotune::record_id(g, r);
  t.gpu = gpu_of(g);
  t.spec_name = e.spec_name;
  t.spec_hash = r.key.spec_hash;
  t.bucket = {b.seq_q, b.seq_kv, b.batch_heads, b.d_qk, b.d_v, b.str(), b.group};
  t.num_splits = e.num_splits;
  t.config = e.best;
  t.median_ms = e.median_ms;
  t.p20_ms = e.p20_ms;
  t.p80_ms = e.p80_ms;
  t.date = e.date;
  t.flashjit_version = e.flashjit_version;
  t.mode = e.mode;
  for (const autotune::TrialRecord& x : e.runners_up) t.runners_up.push_back({x.config, x.ok, x.median_ms, x.failure});
  return t;
}

CachedKernel kernel_of(const autotune::DecodedKernelEntry& k) {
  const autotune::KernelArtifacts& a = k.artifacts;
  CachedKernel out;
  out.hash = autotune::CompileCache::hash_key(k.key_text);
  out.entry = a.entry;
  out.threads = a.threads;
  out.shared_bytes = a.shared_bytes;
  out.registers = a.registers;
  out.spill_bytes = a.spill_bytes;
  out.created = utc_iso8601(a.created_unix);
  out.ptx_bytes = a.ptx.size();
  out.cubin_bytes = a.cubin.size();
  out.key = k.key_text;
  return out;
}

// ---- JSON --------------------------------------------------------------------------------------

void write_tuning(llvm::json::OStream& j, const CachedTuning& t) {
  j.object([&] {
    j.attribute("id", t.id);
    j.attributeObject("gpu", [&] {
      j.attribute("name", t.gpu.name);
      j.attribute("sm_count", t.gpu.sm_count);
      j.attribute("compute_capability", std::to_string(t.gpu.cc_major) + "." + std::to_string(t.gpu.cc_minor));
      j.attribute("driver_version", t.gpu.driver_version);
      j.attribute("identity", t.gpu.identity);
    });
    j.attribute("spec_name", t.spec_name);
    j.attribute("spec_hash", t.spec_hash);
    j.attributeObject("bucket", [&] {
      j.attribute("seq_q", t.bucket.seq_q);
      j.attribute("seq_kv", t.bucket.seq_kv);
      j.attribute("batch_heads", t.bucket.batch_heads);
      j.attribute("d_qk", t.bucket.d_qk);
      j.attribute("d_v", t.bucket.d_v);
      j.attribute("group", t.bucket.group);
      j.attribute("name", t.bucket.name);
    });
    j.attribute("num_splits", t.num_splits);
    j.attribute("config", t.config.str());
    j.attribute("median_ms", number_or_null(t.median_ms));
    j.attribute("p20_ms", number_or_null(t.p20_ms));
    j.attribute("p80_ms", number_or_null(t.p80_ms));
    j.attribute("date", t.date);
    j.attribute("flashjit_version", t.flashjit_version);
    j.attribute("mode", t.mode);
    j.attributeArray("runners_up", [&] {
      for (const CacheRunnerUp& r : t.runners_up)
        j.object([&] {
          j.attribute("config", r.config.str());
          if (r.ok) j.attribute("median_ms", number_or_null(r.median_ms));
          else j.attribute("failed", r.failure);
        });
    });
  });
}

void write_kernel(llvm::json::OStream& j, const CachedKernel& k) {
  j.object([&] {
    j.attribute("hash", k.hash);
    j.attribute("entry", k.entry);
    j.attribute("threads", k.threads);
    j.attribute("shared_bytes", k.shared_bytes);
    j.attribute("registers", k.registers);
    j.attribute("spill_bytes", k.spill_bytes);
    j.attribute("created", k.created);
    j.attribute("ptx_bytes", k.ptx_bytes);
    j.attribute("cubin_bytes", k.cubin_bytes);
    j.attribute("key", k.key);
  });
}

}  // namespace

CacheListing list_cache(const std::string& dir) {
  const std::string root = root_or_default(dir);
  const autotune::TuningCache tuning = tuning_cache(root);
  const autotune::CompileCache kernels = compile_cache(root);
  CacheListing out;
  out.cache_dir = root;
  out.tuning_dir = tuning.dir();
  if (trusted(tuning.dir(), &out.untrusted))
    for (const autotune::TuningFile& f : tuning.load_all()) {
      out.gpus.push_back(gpu_of(f.gpu));
      for (const autotune::TuningRecord& r : f.records) out.tunings.push_back(tuning_of(f.gpu, r));
    }
  out.kernels = {kernels.dir(), 0, 0, kernels.stats().max_bytes};
  if (trusted(kernels.dir(), &out.untrusted)) {
    const autotune::CompileCacheStats s = kernels.stats();
    out.kernels.entries = s.entries;
    out.kernels.bytes = s.bytes;
  }
  return out;
}

CacheEntry find_cache_entry(const std::string& prefix, const std::string& dir) {
  if (prefix.empty()) throw Error(ErrorKind::usage, "find_cache_entry needs a prefix of a tuning id or a kernel hash");
  const std::string root = root_or_default(dir);
  CacheEntry out;
  size_t hits = 0;
  std::vector<std::string> untrusted;
  const autotune::TuningCache tuning = tuning_cache(root);
  const std::vector<autotune::TuningFile> files =
      trusted(tuning.dir(), &untrusted) ? tuning.load_all() : std::vector<autotune::TuningFile>();
  for (const autotune::TuningFile& f : files)
    for (const autotune::TuningRecord& r : f.records)
      if (autotune::record_id(f.gpu, r).compare(0, prefix.size(), prefix) == 0) {
        if (++hits == 1) out.tuning = tuning_of(f.gpu, r);
      }
  if (hits > 1) {
    out.tuning.reset();
    out.missing = std::to_string(hits) + " tuning entries have an id starting with '" + prefix + "'; give more digits";
    return out;
  }
  if (hits == 1) return out;
  const autotune::CompileCache kernels = compile_cache(root);
  try {
    if (trusted(kernels.dir(), &untrusted)) out.kernel = kernel_of(kernels.read_by_hash_prefix(prefix));
    else out.missing = "no tuning entry has an id starting with '" + prefix + "'";
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::usage) throw;
    out.missing = "no tuning entry has an id starting with '" + prefix + "', and " + e.what();
  }
  for (const std::string& why : untrusted) out.missing += "; not searched: " + why;
  return out;
}

CacheClearSummary clear_cache(const std::string& dir) {
  const std::string root = root_or_default(dir);
  CacheClearSummary out;
  out.dir = root;
  out.tuning_files = tuning_cache(root).clear();
  out.kernels = compile_cache(root).clear();
  return out;
}

std::string export_tunings(const std::string& dir) {
  const autotune::TuningCache tuning = tuning_cache(root_or_default(dir));
  if (!trusted(tuning.dir(), nullptr))
    throw Error(ErrorKind::usage, "cannot export tunings: " + autotune::untrusted_cache_folder(tuning.dir()));
  return tuning.export_yaml();
}

void export_tunings_to_file(const std::string& path, const std::string& dir) {
  write_file_atomic(path, export_tunings(dir), {.sync_dir = true});
}

TuningImportSummary import_tunings(const std::string& path, const std::string& dir) {
  const autotune::ReadResult r = autotune::read_file_status(path, kMaxImportBytes);
  if (r.status == autotune::ReadResult::Status::missing) throw Error(ErrorKind::usage, "'" + path + "' does not exist");
  if (r.status != autotune::ReadResult::Status::ok) throw Error(ErrorKind::usage, r.error);
  const autotune::ImportSummary s = tuning_cache(root_or_default(dir)).import_yaml(r.content, path);
  return {s.gpus, s.added, s.replaced, s.kept};
}

std::string cache_listing_json(const CacheListing& listing) {
  return json_document([&](llvm::json::OStream& j) {
    j.object([&] {
      j.attribute("cache_dir", listing.cache_dir);
      j.attributeArray("tuning", [&] {
        for (const CachedTuning& t : listing.tunings) write_tuning(j, t);
      });
      j.attributeObject("kernels", [&] {
        j.attribute("dir", listing.kernels.dir);
        j.attribute("count", listing.kernels.entries);
        j.attribute("bytes", listing.kernels.bytes);
        j.attribute("max_bytes", listing.kernels.max_bytes);
      });
      j.attributeArray("untrusted", [&] {
        for (const std::string& why : listing.untrusted) j.value(why);
      });
    });
  });
}

std::string cache_entry_json(const CacheEntry& entry) {
  if (!entry.found())
    throw Error(ErrorKind::usage, "cache_entry_json: the entry was not found (" + entry.missing + ")");
  return json_document([&](llvm::json::OStream& j) {
    if (entry.tuning) write_tuning(j, *entry.tuning);
    else write_kernel(j, *entry.kernel);
  });
}

}  // namespace flashjit

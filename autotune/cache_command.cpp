#include "autotune/cache_command.hpp"

#include <llvm/Support/JSON.h>

#include <cstdio>
#include <ctime>
#include <ostream>

#include "autotune/compile_cache.hpp"
#include "autotune/durable_file.hpp"
#include "autotune/tuning_cache.hpp"
#include "support/clock.hpp"
#include "support/json.hpp"

namespace flashjit::autotune {
namespace {

const char* kHelp =
    "usage: flashjit cache <command> [--json]\n"
    "\n"
    "  list            every tuning entry (GPU identity, spec, shape bucket, chosen config, time)\n"
    "                  and a summary of the compiled kernels\n"
    "  show KEY        one entry in full: a tuning entry id or a kernel hash (a unique prefix)\n"
    "  clear           delete all tuning entries (also files moved aside as corrupt) and compiled\n"
    "                  kernels\n"
    "  export FILE     write every GPU identity's tunings to one YAML file ('-' = stdout)\n"
    "  import FILE     merge an export; for the same GPU, key and version the faster entry wins\n"
    "\n"
    "--json prints list/show as JSON. The cache lives in $FLASHJIT_CACHE_DIR (default\n"
    "$XDG_CACHE_HOME/flashjit, else ~/.cache/flashjit); FLASHJIT_CACHE_MAX_BYTES bounds the kernels.\n"
    "Exit codes: 0 ok, 1 no such entry, 2 usage error or a malformed import file.\n";

struct UsageError {
  std::string message;
};

std::string bytes_text(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", double(b) / double(1 << 30));
  else if (b >= (uint64_t(1) << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(1 << 20));
  else if (b >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
  else std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

std::string fixed(double v, int digits) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

void gpu_attributes(llvm::json::OStream& j, const GpuIdentity& g) {
  j.attribute("name", g.name);
  j.attribute("sm_count", g.sm_count);
  j.attribute("compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor));
  j.attribute("driver_version", g.driver_version);
  j.attribute("identity", g.str());
}

void bucket_attributes(llvm::json::OStream& j, const ShapeBucket& b) {
  j.attribute("seq_q", b.seq_q);
  j.attribute("seq_kv", b.seq_kv);
  j.attribute("batch_heads", b.batch_heads);
  j.attribute("d_qk", b.d_qk);
  j.attribute("d_v", b.d_v);
  j.attribute("name", b.str());
}

void write_runner_up(llvm::json::OStream& j, const TrialRecord& t) {
  j.object([&] {
    j.attribute("config", config_name(t.config));
    if (t.ok) j.attribute("median_ms", number_or_null(t.median_ms));
    else j.attribute("failed", t.failure);
  });
}

void write_record(llvm::json::OStream& j, const GpuIdentity& g, const TuningRecord& r) {
  const TuningEntry& e = r.entry;
  j.object([&] {
    j.attribute("id", record_id(g, r));
    j.attributeObject("gpu", [&] { gpu_attributes(j, g); });
    j.attribute("spec_name", e.spec_name);
    j.attribute("spec_hash", r.key.spec_hash);
    j.attributeObject("bucket", [&] { bucket_attributes(j, r.key.bucket); });
    j.attribute("config", config_name(e.best));
    j.attribute("median_ms", number_or_null(e.median_ms));
    j.attribute("p20_ms", number_or_null(e.p20_ms));
    j.attribute("p80_ms", number_or_null(e.p80_ms));
    j.attribute("date", e.date);
    j.attribute("flashjit_version", e.flashjit_version);
    j.attribute("mode", e.mode);
    j.attributeArray("runners_up", [&] {
      for (const TrialRecord& t : e.runners_up) write_runner_up(j, t);
    });
  });
}

std::string list_json(const CacheCommandEnv& env, const std::vector<TuningFile>& files, const CompileCache& kernels,
                      const CompileCacheStats& ks) {
  return json_document([&](llvm::json::OStream& j) {
    j.object([&] {
      j.attribute("cache_dir", env.cache_root);
      j.attributeArray("tuning", [&] {
        for (const TuningFile& f : files)
          for (const TuningRecord& r : f.records) write_record(j, f.gpu, r);
      });
      j.attributeObject("kernels", [&] {
        j.attribute("dir", kernels.dir());
        j.attribute("count", ks.entries);
        j.attribute("bytes", ks.bytes);
        j.attribute("max_bytes", ks.max_bytes);
      });
    });
  });
}

std::string kernel_json(const std::string& hash, const DecodedKernelEntry& k) {
  const KernelArtifacts& a = k.artifacts;
  return json_document([&](llvm::json::OStream& j) {
    j.object([&] {
      j.attribute("hash", hash);
      j.attribute("entry", a.entry);
      j.attribute("threads", a.threads);
      j.attribute("shared_bytes", a.shared_bytes);
      j.attribute("registers", a.registers);
      j.attribute("spill_bytes", a.spill_bytes);
      j.attribute("created", utc_iso8601(a.created_unix));
      j.attribute("ptx_bytes", a.ptx.size());
      j.attribute("cubin_bytes", a.cubin.size());
      j.attribute("key", k.key_text);
    });
  });
}

int cmd_list(const CacheCommandEnv& env, bool json, std::ostream& out) {
  TuningCache tuning(env.cache_root, env.flashjit_version);
  CompileCache kernels(env.cache_root, env.max_bytes);
  std::vector<TuningFile> files = tuning.load_all();
  CompileCacheStats ks = kernels.stats();
  if (json) {
    out << list_json(env, files, kernels, ks) << "\n";
    return 0;
  }
  size_t n = 0;
  for (const TuningFile& f : files) n += f.records.size();
  out << "tuning cache " << tuning.dir() << ": " << n << " entr" << (n == 1 ? "y" : "ies") << " for " << files.size()
      << " GPU identit" << (files.size() == 1 ? "y" : "ies") << "\n";
  for (const TuningFile& f : files) {
    out << "  " << f.gpu.str() << "\n";
    out << "    " << pad("id", 14) << pad("spec (hash)", 34) << pad("shape bucket", 32) << pad("config", 20)
        << pad("median ms", 11) << pad("version", 9) << "date\n";
    for (const TuningRecord& r : f.records) {
      std::string spec = (r.entry.spec_name.empty() ? "?" : r.entry.spec_name) + " (" + r.key.spec_hash.substr(0, 12) + ")";
      out << "    " << pad(record_id(f.gpu, r), 14) << pad(spec, 34) << pad(r.key.bucket.str(), 32)
          << pad(config_name(r.entry.best), 20) << pad(fixed(r.entry.median_ms, 4), 11)
          << pad(r.entry.flashjit_version, 9) << r.entry.date << "\n";
    }
  }
  out << "compile cache " << kernels.dir() << ": " << ks.entries << " kernel" << (ks.entries == 1 ? "" : "s") << ", "
      << bytes_text(ks.bytes) << " of " << bytes_text(ks.max_bytes) << " (least recently used are evicted)\n";
  return 0;
}

int cmd_show(const CacheCommandEnv& env, const std::string& key, bool json, std::ostream& out, std::ostream& err) {
  if (key.empty()) throw UsageError{"show needs a KEY (an id or kernel hash from `flashjit cache list`)"};
  TuningCache tuning(env.cache_root, env.flashjit_version);
  std::vector<std::pair<GpuIdentity, TuningRecord>> hits;
  for (const TuningFile& f : tuning.load_all())
    for (const TuningRecord& r : f.records)
      if (record_id(f.gpu, r).compare(0, key.size(), key) == 0) hits.emplace_back(f.gpu, r);
  if (hits.size() > 1) {
    err << "flashjit cache show: " << hits.size() << " tuning entries have an id starting with '" << key
        << "'; give more digits\n";
    return 1;
  }
  if (hits.size() == 1) {
    const auto& [g, r] = hits[0];
    const TuningEntry& e = r.entry;
    if (json) {
      out << json_document([&](llvm::json::OStream& j) { write_record(j, g, r); }) << "\n";
      return 0;
    }
    out << "tuning entry " << record_id(g, r) << "\n"
        << "  gpu        " << g.str() << "\n"
        << "  spec       " << e.spec_name << " (" << r.key.spec_hash << ")\n"
        << "  bucket     " << r.key.bucket.str() << "\n"
        << "  config     " << config_name(e.best) << "\n"
        << "  median     " << fixed(e.median_ms, 4) << " ms (p20 " << fixed(e.p20_ms, 4) << ", p80 " << fixed(e.p80_ms, 4)
        << ")\n"
        << "  tuned      " << e.date << " by flashjit " << e.flashjit_version
        << (e.mode.empty() ? "" : " (" + e.mode + " mode)") << "\n"
        << "  runners-up" << (e.runners_up.empty() ? " none" : "") << "\n";
    for (const TrialRecord& t : e.runners_up)
      out << "    " << pad(config_name(t.config), 20) << (t.ok ? fixed(t.median_ms, 4) + " ms" : "failed: " + t.failure)
          << "\n";
    return 0;
  }
  CompileCache kernels(env.cache_root, env.max_bytes);
  DecodedKernelEntry k;
  try {
    k = kernels.read_by_hash_prefix(key);
  } catch (const Error& e) {
    err << "flashjit cache show: no tuning entry has an id starting with '" << key << "', and " << e.what() << "\n";
    return 1;
  }
  const KernelArtifacts& a = k.artifacts;
  std::string hash = CompileCache::hash_key(k.key_text);
  if (json) {
    out << kernel_json(hash, k) << "\n";
    return 0;
  }
  out << "compiled kernel " << hash << "\n"
      << "  entry      " << a.entry << "\n"
      << "  threads    " << a.threads << ", shared " << a.shared_bytes << " B, registers " << a.registers
      << ", spills " << a.spill_bytes << " B\n"
      << "  created    " << utc_iso8601(a.created_unix) << "\n"
      << "  sizes      PTX " << bytes_text(a.ptx.size()) << ", cubin " << bytes_text(a.cubin.size()) << "\n"
      << "  key\n" << k.key_text << (k.key_text.empty() || k.key_text.back() == '\n' ? "" : "\n");
  return 0;
}

int run(const std::vector<std::string>& args, const CacheCommandEnv& env, std::ostream& out, std::ostream& err) {
  std::vector<std::string> words;
  bool json = false;
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      out << kHelp;
      return 0;
    }
    if (a == "--json") json = true;
    else if (a.size() > 1 && a[0] == '-' && a != "-") throw UsageError{"unknown option " + a + "; allowed: --json --help"};
    else words.push_back(a);
  }
  if (words.empty()) throw UsageError{"missing command (list, show, clear, export or import)"};
  const std::string& cmd = words[0];
  auto expect_args = [&](size_t n, const char* what) {
    if (words.size() != n + 1)
      throw UsageError{cmd + " takes " + (n ? std::string("one argument, ") + what : std::string("no arguments"))};
  };
  if (json && cmd != "list" && cmd != "show") throw UsageError{"--json applies to list and show only"};
  if (cmd == "list") {
    expect_args(0, "");
    return cmd_list(env, json, out);
  }
  if (cmd == "show") {
    expect_args(1, "KEY");
    return cmd_show(env, words[1], json, out, err);
  }
  if (cmd == "clear") {
    expect_args(0, "");
    size_t t = TuningCache(env.cache_root, env.flashjit_version).clear();
    size_t k = CompileCache(env.cache_root, env.max_bytes).clear();
    out << "removed " << t << " tuning file" << (t == 1 ? "" : "s") << " and " << k << " compiled kernel"
        << (k == 1 ? "" : "s") << " from " << env.cache_root << "\n";
    return 0;
  }
  if (cmd == "export") {
    expect_args(1, "FILE");
    TuningCache tuning(env.cache_root, env.flashjit_version);
    std::string text = tuning.export_yaml();
    if (words[1] == "-") {
      out << text;
    } else {
      write_file_durable(words[1], text);
      out << "exported the tuning cache to " << words[1] << "\n";
    }
    return 0;
  }
  if (cmd == "import") {
    expect_args(1, "FILE");
    ReadResult r = read_file_status(words[1]);
    if (r.status != ReadResult::Status::ok)
      throw UsageError{r.status == ReadResult::Status::missing ? "'" + words[1] + "' does not exist" : r.error};
    ImportSummary s = TuningCache(env.cache_root, env.flashjit_version).import_yaml(r.content, words[1]);
    out << "imported " << words[1] << ": " << s.added << " added, " << s.replaced << " replaced (faster), " << s.kept
        << " kept (cached entry as fast or faster), over " << s.gpus << " GPU identit" << (s.gpus == 1 ? "y" : "ies")
        << "\n";
    return 0;
  }
  throw UsageError{"unknown command '" + cmd + "' (list, show, clear, export or import)"};
}

}  // namespace

int run_cache_command(const std::vector<std::string>& args, const CacheCommandEnv& env, std::ostream& out,
                      std::ostream& err) {
  try {
    return run(args, env, out, err);
  } catch (const UsageError& e) {
    err << "flashjit cache: " << e.message << "\n\n" << kHelp;
    return 2;
  } catch (const Error& e) {
    err << "flashjit cache: " << e.what() << "\n";
    return e.kind() == ErrorKind::usage || e.kind() == ErrorKind::spec ? 2 : 1;
  } catch (const std::exception& e) {
    err << "flashjit cache: internal error: " << e.what() << " (a flashjit bug; please report it)\n";
    return 70;
  }
}

}  // namespace flashjit::autotune

// `flashjit cache list|show|clear|export|import`: the on-disk caches through the public cache API
// (include/flashjit/cache.hpp); this file only lays out text, and prints the JSON the library writes.
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "flashjit/cache.hpp"
#include "support/printable.hpp"
#include "tools/cli.hpp"

namespace flashjit::cli {

namespace {

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

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

int list(bool json) {
  const CacheListing l = list_cache();
  if (json) {
    std::cout << cache_listing_json(l) << "\n";
    return kOk;
  }
  std::ostringstream out;  // cache entries are files anyone may have edited: printed through printable()
  out << "tuning cache " << l.tuning_dir << ": " << plural(l.tunings.size(), "entry", "entries") << " for "
      << plural(l.gpus.size(), "GPU identity", "GPU identities") << "\n";
  for (const CacheGpu& g : l.gpus) {
    out << "  " << g.identity << "\n"
        << "    " << pad("id", 14) << pad("spec (key)", 44) << pad("shape bucket", 32) << pad("config", 20)
        << pad("median ms", 11) << pad("version", 9) << "date\n";
    for (const CachedTuning& t : l.tunings) {
      if (t.gpu.identity != g.identity) continue;
      // "fwd-42-0123456789ab": the kernel family the tuning was timed on, then the spec hash's head.
      const size_t dash = t.spec_hash.rfind('-');
      const size_t head = dash == std::string::npos ? 0 : dash + 1;
      const std::string spec =
          (t.spec_name.empty() ? "?" : t.spec_name) + " (" + t.spec_hash.substr(0, head + 12) + ")";
      out << "    " << pad(t.id, 14) << pad(spec, 44) << pad(t.bucket.name, 32) << pad(t.config.str(), 20)
          << pad(fixed(t.median_ms, 4), 11) << pad(t.flashjit_version, 9) << t.date << "\n";
    }
  }
  const CompileCacheSummary& k = l.kernels;
  out << "compile cache " << k.dir << ": " << plural(k.entries, "kernel", "kernels") << ", "
      << bytes_text(k.bytes) << " of " << bytes_text(k.max_bytes) << " (least recently used are evicted)\n";
  for (const std::string& why : l.untrusted) out << "not trusted, not listed: " << why << "\n";
  std::cout << printable(out.str());
  return kOk;
}

void print_tuning(std::ostream& out, const CachedTuning& t) {
  out << "tuning entry " << t.id << "\n"
      << "  gpu        " << t.gpu.identity << "\n"
      << "  spec       " << t.spec_name << " (" << t.spec_hash << ")\n"
      << "  bucket     " << t.bucket.name << "\n"
      << "  config     " << t.config.str()
      << (t.num_splits ? ", split-KV " + std::to_string(t.num_splits) + " pieces (tuned)" : std::string()) << "\n"
      << "  median     " << fixed(t.median_ms, 4) << " ms (p20 " << fixed(t.p20_ms, 4) << ", p80 "
      << fixed(t.p80_ms, 4) << ")\n"
      << "  tuned      " << t.date << " by flashjit " << t.flashjit_version
      << (t.mode.empty() ? "" : " (" + t.mode + " mode)") << "\n"
      << "  runners-up" << (t.runners_up.empty() ? " none" : "") << "\n";
  for (const CacheRunnerUp& r : t.runners_up)
    out << "    " << pad(r.config.str(), 20) << (r.ok ? fixed(r.median_ms, 4) + " ms" : "failed: " + r.failure)
        << "\n";
}

void print_kernel(std::ostream& out, const CachedKernel& k) {
  out << "compiled kernel " << k.hash << "\n"
      << "  entry      " << k.entry << "\n"
      << "  threads    " << k.threads << ", shared " << k.shared_bytes << " B, registers " << k.registers
      << ", spills " << k.spill_bytes << " B\n"
      << "  created    " << k.created << "\n"
      << "  sizes      PTX " << bytes_text(k.ptx_bytes) << ", cubin " << bytes_text(k.cubin_bytes) << "\n"
      << "  key\n"
      << k.key << (k.key.empty() || k.key.back() == '\n' ? "" : "\n");
}

int show(const std::string& key, bool json) {
  const CacheEntry e = find_cache_entry(key);
  if (!e.found()) {
    std::cerr << "flashjit cache show: " << printable(e.missing) << "\n";
    return kFailure;
  }
  if (json) {
    std::cout << cache_entry_json(e) << "\n";
    return kOk;
  }
  std::ostringstream out;
  if (e.tuning) print_tuning(out, *e.tuning);
  else print_kernel(out, *e.kernel);
  std::cout << printable(out.str());
  return kOk;
}

int clear() {
  const CacheClearSummary s = clear_cache();
  std::cout << "removed " << plural(s.tuning_files, "tuning file", "tuning files") << " and "
            << plural(s.kernels, "compiled kernel", "compiled kernels") << " from " << s.dir << "\n";
  return kOk;
}

int export_to(const std::string& file) {
  if (file == "-") {
    std::cout << export_tunings();
    return kOk;
  }
  export_tunings_to_file(file);
  std::cout << "exported the tuning cache to " << file << "\n";
  return kOk;
}

int import_from(const std::string& file) {
  const TuningImportSummary s = import_tunings(file);
  std::cout << "imported " << file << ": " << s.added << " added, " << s.replaced << " replaced (faster), " << s.kept
            << " kept (cached entry as fast or faster), over " << plural(s.gpus, "GPU identity", "GPU identities")
            << "\n";
  return kOk;
}

struct CacheArgs {
  bool json = false;
  std::string key, file;
};

}  // namespace

Command add_cache(CLI::App& app) {
  CLI::App* sub =
      app.add_subcommand("cache", "the on-disk kernel and tuning caches: list, show, clear, export, import");
  sub->footer(
      "The cache lives in $FLASHJIT_CACHE_DIR (default $XDG_CACHE_HOME/flashjit, else ~/.cache/flashjit);\n"
      "FLASHJIT_CACHE_MAX_BYTES bounds the compiled kernels.\n"
      "Exit codes: 0 ok, 1 no such entry, 2 usage error or a malformed import file.");
  auto a = std::make_shared<CacheArgs>();
  sub->add_flag("--json", a->json, "print list or show as JSON");
  CLI::App* ls = sub->add_subcommand(
      "list", "every tuning entry (GPU identity, spec, shape bucket, chosen config, time) and a summary of the "
              "compiled kernels");
  ls->add_flag("--json", a->json, "print JSON");
  CLI::App* sh = sub->add_subcommand("show", "one entry in full: a tuning entry id or a kernel hash (a unique prefix)");
  sh->add_option("KEY", a->key, "an id or kernel hash from `flashjit cache list`, or a unique prefix")
      ->type_name("")
      ->required()
      ->check(parsed_by([](const std::string& key) {
        if (key.empty()) throw Error(ErrorKind::usage, "expected an id or hash, or a prefix of one; got ''");
      }));
  sh->add_flag("--json", a->json, "print JSON");
  CLI::App* cl = sub->add_subcommand(
      "clear", "delete all tuning entries (also files moved aside as corrupt) and compiled kernels");
  CLI::App* ex = sub->add_subcommand("export", "write every GPU identity's tunings to one YAML file ('-' = stdout)");
  ex->add_option("FILE", a->file, "the file to write, or - for stdout")->type_name("")->required();
  CLI::App* im =
      sub->add_subcommand("import", "merge an export; for the same GPU, key and version the faster entry wins");
  im->add_option("FILE", a->file, "a file written by `flashjit cache export`")->type_name("")->required();
  return {sub, [=] {
            if (a->json && !ls->parsed() && !sh->parsed())
              throw Error(ErrorKind::usage, "--json applies to list and show only");
            if (ls->parsed()) return list(a->json);
            if (sh->parsed()) return show(a->key, a->json);
            if (cl->parsed()) return clear();
            if (ex->parsed()) return export_to(a->file);
            if (im->parsed()) return import_from(a->file);
            throw Error(ErrorKind::usage, "missing command: list, show, clear, export or import");
          }};
}

}  // namespace flashjit::cli

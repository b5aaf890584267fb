#include "autotune/tuning_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>

#include "flashjit/flashjit.hpp"

namespace flashjit::autotune {
namespace {

// Shortest text that reads back to the same double (std::to_chars), so export → import is exact.
std::string number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "0";
}

void emit_config(YAML::Emitter& y, const TileConfig& c) {
  y << YAML::Flow << YAML::BeginMap << YAML::Key << "block_m" << YAML::Value << c.block_m << YAML::Key << "block_n"
    << YAML::Value << c.block_n << YAML::Key << "num_warps" << YAML::Value << c.num_warps << YAML::Key
    << "num_stages" << YAML::Value << c.num_stages << YAML::EndMap;
}

void emit_body(YAML::Emitter& y, const TuningFile& f) {
  y << YAML::Key << "schema" << YAML::Value << kTuningSchemaVersion;
  y << YAML::Key << "gpu" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << f.gpu.name;
  y << YAML::Key << "sm_count" << YAML::Value << f.gpu.sm_count;
  y << YAML::Key << "cc_major" << YAML::Value << f.gpu.cc_major;
  y << YAML::Key << "cc_minor" << YAML::Value << f.gpu.cc_minor;
  y << YAML::Key << "driver_version" << YAML::Value << f.gpu.driver_version;
  y << YAML::EndMap;
  y << YAML::Key << "entries" << YAML::Value << YAML::BeginSeq;
  for (const TuningRecord& r : f.records) {
    const TuningEntry& e = r.entry;
    y << YAML::BeginMap;
    y << YAML::Key << "spec_hash" << YAML::Value << YAML::DoubleQuoted << r.key.spec_hash;
    y << YAML::Key << "spec_name" << YAML::Value << YAML::DoubleQuoted << e.spec_name;
    const ShapeBucket& b = r.key.bucket;
    y << YAML::Key << "bucket" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "seq_q" << YAML::Value
      << b.seq_q << YAML::Key << "seq_kv" << YAML::Value << b.seq_kv << YAML::Key << "batch_heads" << YAML::Value
      << b.batch_heads << YAML::Key << "d_qk" << YAML::Value << b.d_qk << YAML::Key << "d_v" << YAML::Value << b.d_v;
    if (b.group > 1) y << YAML::Key << "group" << YAML::Value << b.group;
    if (b.page_size > 0) y << YAML::Key << "page_size" << YAML::Value << b.page_size;
    y << YAML::EndMap;
    y << YAML::Key << "best" << YAML::Value;
    emit_config(y, e.best);
    y << YAML::Key << "median_ms" << YAML::Value << number(e.median_ms);
    y << YAML::Key << "p20_ms" << YAML::Value << number(e.p20_ms);
    y << YAML::Key << "p80_ms" << YAML::Value << number(e.p80_ms);
    y << YAML::Key << "date" << YAML::Value << YAML::DoubleQuoted << e.date;
    y << YAML::Key << "flashjit_version" << YAML::Value << YAML::DoubleQuoted << e.flashjit_version;
    y << YAML::Key << "mode" << YAML::Value << YAML::DoubleQuoted << e.mode;
    if (e.num_splits) y << YAML::Key << "num_splits" << YAML::Value << e.num_splits;
    y << YAML::Key << "runners_up" << YAML::Value << YAML::BeginSeq;
    for (const TrialRecord& t : e.runners_up) {
      y << YAML::Flow << YAML::BeginMap << YAML::Key << "config" << YAML::Value << config_name(t.config);
      if (t.ok)
        y << YAML::Key << "median_ms" << YAML::Value << number(t.median_ms);
      else
        y << YAML::Key << "failed" << YAML::Value << YAML::DoubleQuoted << t.failure;
      y << YAML::EndMap;
    }
    y << YAML::EndSeq;
    y << YAML::EndMap;
  }
  y << YAML::EndSeq;
}

// Strict field access: every error names the file, the entry and the field.
struct Reader {
  std::string where;
  [[noreturn]] void fail(const std::string& what) const { throw Error(ErrorKind::usage, where + ": " + what); }
  YAML::Node need(const YAML::Node& n, const char* field, const std::string& ctx) const {
    if (!n.IsMap()) fail(ctx + " is not a mapping");
    YAML::Node v = n[field];
    if (!v) fail(ctx + " lacks '" + field + "'");
    return v;
  }
  template <class T>
  T get(const YAML::Node& n, const char* field, const std::string& ctx) const {
    YAML::Node v = need(n, field, ctx);
    try {
      return v.as<T>();
    } catch (const YAML::Exception&) {
      fail(ctx + "." + field + " has the wrong type");
    }
  }
  int positive(const YAML::Node& n, const char* field, const std::string& ctx) const {
    int v = get<int>(n, field, ctx);
    if (v <= 0) fail(ctx + "." + field + " must be positive, got " + std::to_string(v));
    return v;
  }
  double time(const YAML::Node& n, const char* field, const std::string& ctx) const {
    double v = get<double>(n, field, ctx);
    if (!std::isfinite(v) || v < 0) fail(ctx + "." + field + " must be a finite time >= 0");
    return v;
  }
  TileConfig config(const YAML::Node& n, const std::string& ctx) const {
    return {positive(n, "block_m", ctx), positive(n, "block_n", ctx), positive(n, "num_warps", ctx),
            positive(n, "num_stages", ctx)};
  }

  TuningFile file(const YAML::Node& root, const std::string& ctx) const {
    if (!root.IsMap()) fail(ctx + " is not a YAML mapping");
    int schema = get<int>(root, "schema", ctx);
    if (schema != kTuningSchemaVersion)
      fail("schema " + std::to_string(schema) + ", this flashjit reads schema " + std::to_string(kTuningSchemaVersion));
    TuningFile f;
    YAML::Node g = need(root, "gpu", ctx);
    f.gpu = {get<std::string>(g, "name", "gpu"), positive(g, "sm_count", "gpu"), get<int>(g, "cc_major", "gpu"),
             get<int>(g, "cc_minor", "gpu"), get<int>(g, "driver_version", "gpu")};
    YAML::Node entries = need(root, "entries", ctx);
    if (!entries.IsSequence()) fail("'entries' is not a list");
    for (size_t i = 0; i < entries.size(); ++i) {
      const YAML::Node& n = entries[i];
      const std::string c = "entries[" + std::to_string(i) + "]";
      TuningRecord r;
      r.key.spec_hash = get<std::string>(n, "spec_hash", c);
      if (r.key.spec_hash.empty()) fail(c + ".spec_hash is empty");
      YAML::Node b = need(n, "bucket", c);
      const std::string cb = c + ".bucket";
      r.key.bucket = {positive(b, "seq_q", cb), positive(b, "seq_kv", cb), positive(b, "batch_heads", cb),
                      positive(b, "d_qk", cb), positive(b, "d_v", cb)};
      // Optional: buckets of one query head per K/V head carry none (and read the same as before).
      if (b["group"]) r.key.bucket.group = positive(b, "group", cb);
      if (b["page_size"]) {  // paged buckets only
        r.key.bucket.page_size = positive(b, "page_size", cb);
        if (r.key.bucket.page_size % 16) fail(cb + ".page_size " + std::to_string(r.key.bucket.page_size) + " is not a multiple of 16");
      }
      TuningEntry& e = r.entry;
      e.spec_name = get<std::string>(n, "spec_name", c);
      e.best = config(need(n, "best", c), c + ".best");
      e.median_ms = time(n, "median_ms", c);
      e.p20_ms = time(n, "p20_ms", c);
      e.p80_ms = time(n, "p80_ms", c);
      e.date = get<std::string>(n, "date", c);
      e.flashjit_version = get<std::string>(n, "flashjit_version", c);
      e.mode = n["mode"] ? get<std::string>(n, "mode", c) : "";
      // Optional (entries without it are automatic), so files stay readable by older flashjits.
      e.num_splits = n["num_splits"] ? get<int>(n, "num_splits", c) : 0;
      if (e.num_splits < 0 || e.num_splits > 128)
        fail(c + ".num_splits is " + std::to_string(e.num_splits) + "; allowed: 0 (automatic) to 128");
      YAML::Node ru = need(n, "runners_up", c);
      if (!ru.IsSequence()) fail(c + ".runners_up is not a list");
      for (size_t k = 0; k < ru.size(); ++k) {
        const std::string ck = c + ".runners_up[" + std::to_string(k) + "]";
        TrialRecord t;
        auto cfg = parse_config_name(get<std::string>(ru[k], "config", ck));
        if (!cfg) fail(ck + ".config is not of the form bm64_bn64_w4_s2");
        t.config = *cfg;
        if (ru[k]["median_ms"]) {
          t.ok = true;
          t.median_ms = time(ru[k], "median_ms", ck);
        } else {
          t.failure = get<std::string>(ru[k], "failed", ck);
        }
        e.runners_up.push_back(std::move(t));
      }
      f.records.push_back(std::move(r));
    }
    return f;
  }
};

YAML::Node load(std::string_view text, const Reader& rd) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    rd.fail("not valid YAML: " + e.msg + " (line " + std::to_string(e.mark.line + 1) + ")");
  }
}

}  // namespace

std::string emit_tuning_file(const TuningFile& file) {
  YAML::Emitter y;
  y << YAML::Comment("flashjit tuning cache for one GPU identity; rewritten by flashjit under a lock");
  y << YAML::BeginMap;
  emit_body(y, file);
  y << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

TuningFile parse_tuning_file(std::string_view text, std::string_view where) {
  Reader rd{std::string(where)};
  return rd.file(load(text, rd), "file");
}

int tuning_file_schema(std::string_view text) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (root.IsMap() && root["schema"]) return root["schema"].as<int>();
  } catch (const YAML::Exception&) {
  }
  return 0;
}

std::string emit_tuning_export(const std::vector<TuningFile>& files) {
  YAML::Emitter y;
  y << YAML::Comment("flashjit tuning export: `flashjit cache import FILE` merges it (the faster entry wins)");
  y << YAML::BeginMap << YAML::Key << "flashjit_tuning_export" << YAML::Value << kTuningExportVersion;
  y << YAML::Key << "gpus" << YAML::Value << YAML::BeginSeq;
  for (const TuningFile& f : files) {
    y << YAML::BeginMap;
    emit_body(y, f);
    y << YAML::EndMap;
  }
  y << YAML::EndSeq << YAML::EndMap;
  return std::string(y.c_str()) + "\n";
}

std::vector<TuningFile> parse_tuning_export(std::string_view text, std::string_view where) {
  Reader rd{std::string(where)};
  YAML::Node root = load(text, rd);
  if (!root.IsMap() || !root["flashjit_tuning_export"])
    rd.fail("not a flashjit tuning export (no 'flashjit_tuning_export' key)");
  int v = rd.get<int>(root, "flashjit_tuning_export", "export");
  if (v != kTuningExportVersion)
    rd.fail("export version " + std::to_string(v) + ", this flashjit reads version " + std::to_string(kTuningExportVersion));
  YAML::Node gpus = rd.need(root, "gpus", "export");
  if (!gpus.IsSequence()) rd.fail("'gpus' is not a list");
  std::vector<TuningFile> out;
  for (size_t i = 0; i < gpus.size(); ++i) out.push_back(rd.file(gpus[i], "gpus[" + std::to_string(i) + "]"));
  return out;
}

}  // namespace flashjit::autotune

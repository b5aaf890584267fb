// `flashjit tune SPEC --shapes BxHxSqxSkv,...`: autotune and store, on the public tuning API.
#include <cerrno>
#include <climits>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "flashjit/tuning.hpp"
#include "tools/cli.hpp"

namespace flashjit::cli {

namespace {

std::string ms3(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms);
  return buf;
}

void print_table(std::ostream& out, const std::vector<TuneReport>& reports) {
  out << std::left << std::setw(22) << "shape" << std::setw(34) << "bucket" << std::setw(18) << "tuned" << std::setw(20)
      << "median [p20,p80] ms" << std::setw(20) << "  heuristic" << std::setw(10) << "ms" << "speedup\n";
  for (const TuneReport& r : reports) {
    const ProblemShape& s = r.shape;
    const std::string shape = std::to_string(s.batch) + "x" + std::to_string(s.heads_q) +
                              (s.heads_kv != s.heads_q ? "/" + std::to_string(s.heads_kv) : "") + "x" +
                              std::to_string(s.seq_q) + "x" + std::to_string(s.seq_kv);
    out << std::setw(22) << shape << std::setw(34) << r.bucket;
    if (r.found)
      out << std::setw(18) << r.best.str() << std::setw(20)
          << (ms3(r.median_ms) + " [" + ms3(r.p20_ms) + "," + ms3(r.p80_ms) + "]");
    else
      out << std::setw(18) << "(none worked)" << std::setw(20) << "-";
    out << "  " << std::setw(18) << r.heuristic.str() << std::setw(10)
        << (r.heuristic_ms >= 0 ? ms3(r.heuristic_ms) : std::string("-"));
    if (r.found && r.heuristic_ms >= 0) {
      char x[32];
      std::snprintf(x, sizeof x, "%.2fx", r.heuristic_ms / r.median_ms);
      out << x;
    } else {
      out << "-";
    }
    out << (r.found && !r.stored ? "  (not stored: " + r.store_error + ")" : "") << "\n";
  }
}

// "4x16x4096x4096,1x32/8x1x32768" (x or ×; H, or Hq/Hkv for grouped K/V heads); Error(usage)
// naming the bad item.
std::vector<ProblemShape> parse_tune_shapes(const std::string& text) {
  std::vector<ProblemShape> out;
  std::string t = text;
  for (size_t at; (at = t.find("\xC3\x97")) != std::string::npos;) t.replace(at, 2, "x");  // ×
  std::vector<std::string> list;
  for (size_t from = 0;;) {  // split by ',' keeping empty items (",," and a trailing ',' are errors)
    size_t comma = t.find(',', from);
    list.push_back(t.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  for (const std::string& item : list) {
    int64_t v[4] = {}, heads_kv = 0;
    int n = 0;
    std::stringstream parts(item);
    bool ok = !item.empty();
    auto number = [&](const std::string& p, int64_t& to) {
      char* end = nullptr;
      errno = 0;
      long long x = std::strtoll(p.c_str(), &end, 10);
      ok = ok && !p.empty() && *end == '\0' && errno != ERANGE && x > 0;
      to = x;
    };
    for (std::string p; ok && std::getline(parts, p, 'x');) {
      ok = n < 4;
      const size_t slash = n == 1 ? p.find('/') : std::string::npos;
      if (slash != std::string::npos) number(p.substr(slash + 1), heads_kv), p.resize(slash);
      if (ok) number(p, v[n++]);
    }
    if (ok && heads_kv && v[1] % heads_kv != 0) ok = false;
    if (!ok || n != 4)
      throw Error(ErrorKind::usage, "'" + item + "' is not BxHxSqxSkv (four positive integers, e.g. 4x16x4096x4096; H may "
                                    "be Hq/Hkv, Hkv dividing Hq, e.g. 1x32/8x1x32768)");
    ProblemShape s;
    s.batch = v[0];
    s.heads_q = v[1];
    s.heads_kv = heads_kv ? heads_kv : v[1];
    s.seq_q = v[2];
    s.seq_kv = v[3];
    out.push_back(s);
  }
  return out;
}

struct TuneArgs {
  std::string spec;
  std::string shapes;
  std::string mode;  // "" → TuneOptions' default (FLASHJIT_AUTOTUNE)
  double deadline_s = 0;  // 0: none
  bool json = false;
  bool backward = false;
  int paged = 0;  // rows per page; 0: contiguous K/V
  int device = 0;
};

int tune_command(const TuneArgs& a) {
  const std::vector<ProblemShape> shapes = parse_tune_shapes(a.shapes);
  TuneOptions options;
  options.mode = a.mode;
  options.backward = a.backward;
  options.page_size = a.paged;
  if (a.paged && a.backward) {
    std::cerr << "flashjit tune: --paged tunes the forward on a paged K/V cache; it cannot be combined with --backward\n";
    return kUsage;
  }
  if (a.paged % 16 != 0) {
    std::cerr << "flashjit tune: --paged " << a.paged << " is not allowed; a page holds a positive multiple of 16 rows\n";
    return kUsage;
  }
  if (a.deadline_s > 0) options.deadline_s = a.deadline_s;
  // The spec first: its errors are exit 2 with or without a GPU.
  AttentionSpec spec = load_spec_arg(a.spec);
  spec.validate();
  std::optional<Runtime> rt;
  try {
    rt = Runtime::create(a.device);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::no_gpu) throw;
    std::cerr << "flashjit tune: " << e.what() << "\nflashjit tune: nothing ran (exit 69: no GPU driver or device); the spec "
              << a.spec << " is valid, " << shapes.size() << " shape(s) were not tuned\n";
    return kNoGpu;
  }
  const DeviceInfo& info = rt->device();
  std::cerr << "tuning " << (a.backward ? "the backward of " : "") << (spec.name.empty() ? a.spec : spec.name) << " on " << info.name << " (" << info.arch()
            << ", driver " << info.driver_version << "), " << shapes.size() << " shape(s); cache " << cache_dir() << "\n";
  options.progress = &std::cerr;
  std::vector<TuneReport> reports;
  bool all_ok = true;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ProblemShape& s = shapes[i];
    std::cerr << "shape " << (i + 1) << "/" << shapes.size() << ": " << s.batch << "x" << s.heads_q
              << (s.heads_kv != s.heads_q ? "/" + std::to_string(s.heads_kv) : "") << "x" << s.seq_q
              << "x" << s.seq_kv << "\n";
    reports.push_back(tune(*rt, spec, s, options));
    std::cerr << "  " << reports.back().summary << "\n";
    all_ok = all_ok && reports.back().found;
  }
  if (a.json) std::cout << tune_reports_json(reports);
  else print_table(std::cout, reports);
  return all_ok ? kOk : kFailure;
}

}  // namespace

Command add_tune(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("tune", "autotune the tile config per shape and store it");
  sub->footer(
      "Autotunes the tile config of SPEC for each shape (batch x heads x seq_q x seq_kv) on this GPU and\n"
      "stores the winners in the tuning cache (`flashjit cache list` shows them); Kernel::forward then uses\n"
      "them for every shape of the same bucket (sequence lengths and batch*heads rounded up to powers of two).\n"
      "--mode: quick (the heuristic's neighbourhood, ~6 configs; default unless FLASHJIT_AUTOTUNE=full) or\n"
      "full (the whole pruned space). --deadline S: stop timing a shape after S seconds, best so far wins.\n"
      "--backward: tune Kernel::backward's configs instead (the forward's heuristic kernel makes O and LSE).\n"
      "--paged P: tune the forward on a paged K/V cache of P rows per page (shuffled pages), filed under a\n"
      "bucket of its own (\"_pP\") that paged calls with that page size use.\n"
      "Progress lines go to stderr; the summary (tuned vs heuristic default) to stdout, as JSON with --json.\n"
      "Exit codes: 0 ok, 1 a shape had no working config, 2 usage or spec error, 69 no GPU, 70 internal error.");
  auto a = std::make_shared<TuneArgs>();
  sub->add_option("SPEC", a->spec, "the spec (YAML file)")->type_name("")->required();
  sub->add_option("--shapes", a->shapes, "shapes to tune, e.g. 4x16x4096x4096,1x32/8x1x32768 (H or Hq/Hkv)")
      ->required()
      ->type_name("BxHxSqxSkv[,...]")
      ->check(parsed_by(parse_tune_shapes));
  sub->add_option("--mode", a->mode, "search space")->type_name("quick|full")->check(one_of({"quick", "full"}));
  sub->add_option("--deadline", a->deadline_s, "seconds per shape; the best so far wins")
      ->type_name("S")
      ->check(positive_number());
  sub->add_flag("--json", a->json, "print the summary as JSON");
  sub->add_flag("--backward", a->backward, "tune the backward pass's tile configs (dK/dV and dQ kernels)");
  sub->add_option("--paged", a->paged, "tune on a paged K/V cache of P rows per page (a multiple of 16)")
      ->type_name("P")
      ->check(integer_in(16, 1 << 20));
  sub->add_option("--device", a->device, "CUDA device ordinal")
      ->type_name("N")
      ->check(integer_in(0, INT_MAX))
      ->capture_default_str();
  return {sub, [a] { return tune_command(*a); }};
}

}  // namespace flashjit::cli

// The autotuner's reports: the final ranking table (stderr) and the JSON form (--json).
#include <llvm/Support/JSON.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "autotune/search.hpp"
#include "autotune/tuning_key.hpp"
#include "support/json.hpp"

namespace flashjit::autotune {
namespace {

void config_attributes(llvm::json::OStream& j, const TileConfig& c) {
  j.attribute("block_m", c.block_m);
  j.attribute("block_n", c.block_n);
  j.attribute("num_warps", c.num_warps);
  j.attribute("num_stages", c.num_stages);
  j.attribute("name", config_name(c));
}

// median_ms, p20_ms, p80_ms of `m`; null when `timed` is false.
void time_attributes(llvm::json::OStream& j, const Measurement& m, bool timed) {
  j.attribute("median_ms", number_or_null(timed ? m.median_ms : NAN));
  j.attribute("p20_ms", number_or_null(timed ? m.p20_ms : NAN));
  j.attribute("p80_ms", number_or_null(timed ? m.p80_ms : NAN));
}

void write_candidate(llvm::json::OStream& j, const Candidate& c) {
  j.object([&] {
    j.attributeObject("config", [&] { config_attributes(j, c.config); });
    j.attribute("status", candidate_status_name(c.status));
    time_attributes(j, c.m, c.m.ok);
    j.attribute("binary_hash", c.m.binary_hash);
    j.attribute("note", c.note);
  });
}

}  // namespace

void print_search_summary(std::ostream& out, const SearchResult& r) {
  std::vector<const Candidate*> rows;
  for (const Candidate& c : r.candidates)
    if (c.status != Candidate::Status::not_selected) rows.push_back(&c);
  // Measured first by median (failures are +inf), then pruned and skipped in enumeration order.
  auto rank = [](const Candidate* c) {
    switch (c->status) {
      case Candidate::Status::measured:
      case Candidate::Status::reused:
      case Candidate::Status::failed: return 0;
      case Candidate::Status::skipped: return 1;
      default: return 2;
    }
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const Candidate* a, const Candidate* b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return rank(a) == 0 && a->m.median_ms < b->m.median_ms;
  });
  char line[256];
  std::snprintf(line, sizeof line, "autotune summary (%s, %.1f s)\n %4s  %-20s %10s %10s %10s  %s\n",
                tune_mode_name(r.mode), r.elapsed_s, "rank", "config", "median ms", "p20 ms", "p80 ms", "note");
  out << line;
  int k = 0;
  for (const Candidate* c : rows) {
    const bool timed = c->m.ok && (c->status == Candidate::Status::measured || c->status == Candidate::Status::reused);
    std::string pos = timed ? std::to_string(++k) : "-";
    std::string note = c->status == Candidate::Status::measured ? "" : std::string(candidate_status_name(c->status));
    if (!c->note.empty()) note += (note.empty() ? "" : ": ") + c->note;
    if (timed)
      std::snprintf(line, sizeof line, " %4s  %-20s %10.4f %10.4f %10.4f  ", pos.c_str(), config_name(c->config).c_str(),
                    c->m.median_ms, c->m.p20_ms, c->m.p80_ms);
    else
      std::snprintf(line, sizeof line, " %4s  %-20s %10s %10s %10s  ", pos.c_str(), config_name(c->config).c_str(), "-",
                    "-", "-");
    out << line << note << "\n";
  }
  out << r.summary << "\n" << std::flush;
}

void write_search_result(llvm::json::OStream& j, const SearchResult& r) {
  j.object([&] {
    j.attribute("mode", tune_mode_name(r.mode));
    j.attributeObject("best", [&] { config_attributes(j, r.best); });
    j.attribute("measured", r.measured);
    time_attributes(j, r.best_m, r.measured);
    j.attribute("selected", r.selected);
    j.attribute("timed", r.timed);
    j.attribute("deadline_hit", r.deadline_hit);
    j.attribute("elapsed_s", number_or_null(r.elapsed_s));
    j.attribute("summary", r.summary);
    j.attributeArray("candidates", [&] {
      for (const Candidate& c : r.candidates) write_candidate(j, c);
    });
  });
}

std::string search_result_json(const SearchResult& r) {
  return json_document([&](llvm::json::OStream& j) { write_search_result(j, r); });
}

TuningEntry tuning_entry_from(const SearchResult& r, const std::string& spec_name) {
  if (!r.measured)
    throw Error(ErrorKind::internal, "internal error: an untimed search result was about to be cached as tuned "
                                     "(a flashjit bug)");
  TuningEntry e;
  e.spec_name = spec_name;
  e.best = r.best;
  e.median_ms = r.best_m.median_ms;
  e.p20_ms = r.best_m.p20_ms;
  e.p80_ms = r.best_m.p80_ms;
  e.mode = tune_mode_name(r.mode);
  for (const Candidate& c : r.candidates) {
    bool timed = c.status == Candidate::Status::measured || c.status == Candidate::Status::reused;
    if (same_config(c.config, r.best) || !(timed || c.status == Candidate::Status::failed)) continue;
    e.runners_up.push_back(TrialRecord{c.config, c.m.ok, c.m.ok ? c.m.median_ms : 0, c.m.ok ? "" : c.note});
  }
  // Fastest first; failures (not ok) last, in timing order.
  std::stable_sort(e.runners_up.begin(), e.runners_up.end(), [](const TrialRecord& a, const TrialRecord& b) {
    if (a.ok != b.ok) return a.ok;
    return a.ok && a.median_ms < b.median_ms;
  });
  return e;
}

}  // namespace flashjit::autotune

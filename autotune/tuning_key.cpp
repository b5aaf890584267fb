#include "autotune/tuning_key.hpp"

#include <charconv>

#include "support/hash.hpp"

namespace flashjit::autotune {

std::string config_name(const TileConfig& c) {
  return "bm" + std::to_string(c.block_m) + "_bn" + std::to_string(c.block_n) + "_w" + std::to_string(c.num_warps) +
         "_s" + std::to_string(c.num_stages);
}

std::optional<TileConfig> parse_config_name(std::string_view text) {
  TileConfig c;
  int* fields[4] = {&c.block_m, &c.block_n, &c.num_warps, &c.num_stages};
  const char* prefixes[4] = {"bm", "_bn", "_w", "_s"};
  for (int i = 0; i < 4; ++i) {
    std::string_view p = prefixes[i];
    if (text.substr(0, p.size()) != p) return std::nullopt;
    text.remove_prefix(p.size());
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *fields[i]);
    if (ec != std::errc() || end == text.data() || *fields[i] <= 0) return std::nullopt;
    text.remove_prefix(size_t(end - text.data()));
  }
  if (!text.empty()) return std::nullopt;
  return c;
}

std::string GpuIdentity::str() const {
  return name + ", " + std::to_string(sm_count) + " SMs, cc " + std::to_string(cc_major) + "." +
         std::to_string(cc_minor) + ", driver " + std::to_string(driver_version);
}

std::string GpuIdentity::file_stem() const {
  std::string stem;
  for (char c : name) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-';
    char out = keep ? c : '_';
    if (out == '_' && !stem.empty() && stem.back() == '_') continue;  // "A  B" → "A_B"
    stem += out;
  }
  if (stem.empty() || stem[0] == '.') stem = "gpu" + stem;  // never a hidden or empty name
  // The sanitised name can collide ("NVIDIA H200" and "NVIDIA_H200"); a hash of the whole identity,
  // each field length-prefixed so that no two identities serialise alike, cannot in practice.
  const std::string full = std::to_string(name.size()) + ":" + name + "|" + std::to_string(sm_count) + "|" +
                           std::to_string(cc_major) + "|" + std::to_string(cc_minor) + "|" +
                           std::to_string(driver_version);
  return stem + "-" + std::to_string(sm_count) + "sm-cc" + std::to_string(cc_major) + std::to_string(cc_minor) +
         "-drv" + std::to_string(driver_version) + "-" + sha256_hex(full).substr(0, 12);
}

int64_t round_up_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

ShapeBucket ShapeBucket::of(int64_t batch, int64_t heads_q, int64_t seq_q, int64_t seq_kv, int d_qk, int d_v,
                            int64_t heads_kv) {
  const int64_t group = heads_kv > 0 && heads_q % heads_kv == 0 ? heads_q / heads_kv : 1;
  return {round_up_pow2(seq_q), round_up_pow2(seq_kv), round_up_pow2(batch * heads_q), d_qk, d_v, group};
}

std::string ShapeBucket::str() const {
  return "sq" + std::to_string(seq_q) + "_skv" + std::to_string(seq_kv) + "_bh" + std::to_string(batch_heads) + "_d" +
         std::to_string(d_qk) + "x" + std::to_string(d_v) + (group > 1 ? "_g" + std::to_string(group) : "") +
         (page_size > 0 ? "_p" + std::to_string(page_size) : "");
}

std::string TuningKey::str() const { return spec_hash + "/" + bucket.str(); }

std::string record_id(const GpuIdentity& gpu, const TuningRecord& r) {
  return sha256_hex(gpu.str() + "|" + r.key.str() + "|" + r.entry.flashjit_version).substr(0, 12);
}

}  // namespace flashjit::autotune

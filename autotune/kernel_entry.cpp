#include "autotune/kernel_entry.hpp"

#include <llvm/Support/xxhash.h>

#include <cctype>
#include <charconv>
#include <cstring>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace flashjit::autotune {
namespace {

constexpr char kMagic[8] = {'F', 'J', 'K', 'E', 'R', 'N', 'E', 'L'};
constexpr size_t kHeaderSize = 64;

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out += char(uint8_t(v >> (8 * i)));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out += char(uint8_t(v >> (8 * i)));
}
uint64_t get_le(std::string_view b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(b[at + i])) << (8 * i);
  return v;
}

uint64_t checksum(std::string_view body) { return llvm::xxh3_64bits(llvm::StringRef(body)); }

std::string encode_meta(const KernelArtifacts& a) {
  for (char c : a.entry)
    if (c == '\n' || c == '\r')
      throw Error(ErrorKind::internal, "internal error: kernel entry name contains a newline (a flashjit bug)");
  return "entry=" + a.entry + "\nthreads=" + std::to_string(a.threads) + "\nshared_bytes=" +
         std::to_string(a.shared_bytes) + "\nregisters=" + std::to_string(a.registers) +
         "\nspill_bytes=" + std::to_string(a.spill_bytes) + "\ncreated=" + std::to_string(a.created_unix) + "\n";
}

template <class Int>
bool parse_int(std::string_view s, Int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

// Returns "" on success, else what is wrong.
std::string decode_meta(std::string_view meta, KernelArtifacts& a) {
  bool seen_entry = false;
  int ints = 0;
  while (!meta.empty()) {
    size_t nl = meta.find('\n');
    if (nl == std::string_view::npos) return "metadata line without a newline";
    std::string_view line = meta.substr(0, nl);
    meta.remove_prefix(nl + 1);
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) return "metadata line without '='";
    std::string_view name = line.substr(0, eq), value = line.substr(eq + 1);
    bool ok = true;
    if (name == "entry") {
      // A PTX entry name flashjit writes: [A-Za-z0-9_] only (anything else, e.g. a '\r', is damage).
      for (char c : value)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
          return "metadata entry name holds a character other than [A-Za-z0-9_]";
      a.entry = std::string(value), seen_entry = true;
    }
    else if (name == "threads") ok = parse_int(value, a.threads), ++ints;
    else if (name == "shared_bytes") ok = parse_int(value, a.shared_bytes), ++ints;
    else if (name == "registers") ok = parse_int(value, a.registers), ++ints;
    else if (name == "spill_bytes") ok = parse_int(value, a.spill_bytes), ++ints;
    else if (name == "created") ok = parse_int(value, a.created_unix), ++ints;
    // Unknown names are ignored: a field added within one format version stays readable.
    if (!ok) return "metadata field '" + std::string(name) + "' is not an integer";
  }
  if (!seen_entry || ints != 5) return "metadata lacks a required field";
  return "";
}

}  // namespace

std::string encode_kernel_entry(std::string_view key_text, const KernelArtifacts& artifacts, uint32_t version) {
  std::string meta = encode_meta(artifacts);
  std::string body;
  body.reserve(key_text.size() + meta.size() + artifacts.ptx.size() + artifacts.cubin.size());
  body.append(key_text).append(meta).append(artifacts.ptx).append(artifacts.cubin);
  std::string out(kMagic, sizeof kMagic);
  put_u32(out, version);
  put_u32(out, kHeaderSize);
  put_u64(out, key_text.size());
  put_u64(out, meta.size());
  put_u64(out, artifacts.ptx.size());
  put_u64(out, artifacts.cubin.size());
  put_u64(out, checksum(body));
  put_u64(out, 0);
  out += body;
  return out;
}

DecodeResult decode_kernel_entry(std::string_view b) {
  DecodeResult r;
  if (b.size() < 16) return r.error = "file is " + std::to_string(b.size()) + " bytes, shorter than the header", r;
  if (std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) return r.error = "not a flashjit kernel cache file (bad magic)", r;
  uint32_t version = uint32_t(get_le(b, 8, 4));
  if (version != kCompileCacheFormatVersion)
    return r.error = "written in cache format version " + std::to_string(version) + ", this flashjit reads version " +
                     std::to_string(kCompileCacheFormatVersion), r;
  if (b.size() < kHeaderSize || get_le(b, 12, 4) != kHeaderSize || get_le(b, 56, 8) != 0)
    return r.error = "truncated or malformed header", r;
  uint64_t len[4];
  uint64_t total = kHeaderSize;
  for (int i = 0; i < 4; ++i) {
    len[i] = get_le(b, 16 + 8 * i, 8);
    if (len[i] > b.size()) return r.error = "section length exceeds the file size (truncated?)", r;
    total += len[i];
  }
  if (total != b.size())
    return r.error = "file has " + std::to_string(b.size()) + " bytes, header announces " + std::to_string(total) +
                     " (truncated?)", r;
  std::string_view body = b.substr(kHeaderSize);
  if (checksum(body) != get_le(b, 48, 8)) return r.error = "checksum mismatch (corrupted file)", r;
  DecodedKernelEntry e;
  size_t at = 0;
  e.key_text = std::string(body.substr(at, len[0]));
  at += len[0];
  if (std::string why = decode_meta(body.substr(at, len[1]), e.artifacts); !why.empty())
    return r.error = "bad metadata: " + why, r;
  at += len[1];
  e.artifacts.ptx = std::string(body.substr(at, len[2]));
  at += len[2];
  e.artifacts.cubin = std::string(body.substr(at, len[3]));
  r.entry = std::move(e);
  return r;
}

}  // namespace flashjit::autotune

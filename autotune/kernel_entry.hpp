// The compile cache's entry: what a compiled kernel leaves on disk, and its versioned binary file
// format (magic, format version, section lengths, checksum) with a decoder that never trusts input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flashjit::autotune {

// Bump when the layout below or the meaning of a field changes; files of other versions are misses.
constexpr uint32_t kCompileCacheFormatVersion = 2;

struct KernelArtifacts {
  std::string entry;         // PTX entry point name
  int threads = 0;           // per CTA
  int shared_bytes = 0;      // dynamic shared memory per CTA
  int registers = -1;        // per thread, from the driver (-1: unknown)
  int spill_bytes = -1;      // local memory per thread (-1: unknown)
  int64_t created_unix = 0;  // seconds since the epoch; 0 → put() stamps the current time
  std::string ptx;
  std::string cubin;         // may be empty (e.g. compiled on a machine without a driver)
};

// File layout (all integers little-endian):
//   0  "FJKERNEL"    8 bytes magic
//   8  u32 version   kCompileCacheFormatVersion
//  12  u32 header    64 (header size, so a later version can grow it)
//  16  u64 key_len, meta_len, ptx_len, cubin_len
//  48  u64 llvm::xxh3_64bits(key | meta | ptx | cubin): detects torn or bit-rotted files; it is
//      not a cryptographic hash (file names use SHA-256 of the key for that)
//  56  u64 reserved (0)
//  64  key text | metadata ("name=value\n" lines) | PTX | cubin
// `version` is a parameter so tests can write files of another format version.
std::string encode_kernel_entry(std::string_view key_text, const KernelArtifacts& artifacts,
                                uint32_t version = kCompileCacheFormatVersion);

struct DecodedKernelEntry {
  std::string key_text;
  KernelArtifacts artifacts;
};
struct DecodeResult {
  std::optional<DecodedKernelEntry> entry;
  std::string error;  // why the bytes are not a valid entry of this format version
};
// Validates magic, version, lengths, checksum and metadata; never throws on bad input.
DecodeResult decode_kernel_entry(std::string_view bytes);

}  // namespace flashjit::autotune

// libFuzzer target: the compile cache's entry decoder. Raw inputs mostly stop at the magic or the
// checksum, so half the inputs are wrapped in a well-formed header with section lengths taken from
// the input and a correct checksum, which reaches the metadata parser. Decoding never crashes and
// never throws; a decoded entry re-encodes to bytes that decode to the same entry.
#include <llvm/Support/xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "autotune/kernel_entry.hpp"

using namespace flashjit::autotune;

namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

// Header per autotune/kernel_entry.hpp: magic, version, header size, four lengths, xxh3, 0.
std::string wrapped(const uint8_t* data, size_t size) {
  if (size < 3) return {};
  const std::string body(reinterpret_cast<const char*>(data + 3), size - 3);
  uint64_t len[4];
  size_t left = body.size();
  for (int i = 0; i < 3; ++i) {
    len[i] = left == 0 ? 0 : data[i] % (left + 1);
    left -= len[i];
  }
  len[3] = left;
  std::string out = "FJKERNEL";
  put_le(out, kCompileCacheFormatVersion, 4);
  put_le(out, 64, 4);
  for (uint64_t l : len) put_le(out, l, 8);
  put_le(out, llvm::xxh3_64bits(llvm::StringRef(body)), 8);
  put_le(out, 0, 8);
  return out + body;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  const std::string bytes =
      size > 0 && (data[0] & 0x80) ? wrapped(data + 1, size - 1) : std::string(reinterpret_cast<const char*>(data), size);
  const DecodeResult r = decode_kernel_entry(bytes);
  if (!r.entry) return 0;
  const DecodeResult again = decode_kernel_entry(encode_kernel_entry(r.entry->key_text, r.entry->artifacts));
  const KernelArtifacts &a = r.entry->artifacts, *b = again.entry ? &again.entry->artifacts : nullptr;
  if (!b || again.entry->key_text != r.entry->key_text || b->entry != a.entry || b->threads != a.threads ||
      b->shared_bytes != a.shared_bytes || b->registers != a.registers || b->spill_bytes != a.spill_bytes ||
      b->created_unix != a.created_unix || b->ptx != a.ptx || b->cubin != a.cubin) {
    std::fprintf(stderr, "a decoded entry does not survive encode + decode: %s\n", again.error.c_str());
    std::abort();
  }
  return 0;
}

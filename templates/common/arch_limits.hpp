// Per-arch limits every template plans against (CUDA C Programming Guide, "Compute Capabilities").
#pragma once

#include <algorithm>
#include <string>

namespace flashjit {

// Shared memory one CTA may use (with the opt-in attribute).
inline int max_shared_bytes(const std::string& arch) {
  if (arch == "sm_80") return 163 * 1024;
  if (arch == "sm_90" || arch == "sm_90a") return 227 * 1024;
  return 99 * 1024;
}

// Shared memory of one SM (228 KB on sm_90, 164 KB on sm_80, 100 KB on sm_86/89), and what the
// driver reserves per CTA (1 KB).
inline int sm_shared_bytes(const std::string& arch) {
  if (arch == "sm_80") return 164 * 1024;
  if (arch == "sm_90" || arch == "sm_90a") return 228 * 1024;
  return 100 * 1024;
}
inline constexpr int kSharedReservedPerCta = 1024;

// Registers per thread beyond the accumulators (addresses, softmax state, loop control, mask
// terms). With 56, the wgmma d = 64 forward (64 + 32 + 16 accumulator registers) fits 168, the
// budget of 3 CTAs of 128 threads, without spilling under ptxas 13.0 (docs/perf-notes.md §7).
// mma.sync also holds K and V fragments from ldmatrix, hence more (the d = 160 forward needs 88 to
// stay spill-free, docs/perf-notes.md §7).
inline constexpr int kRegisterOverheadWgmma = 56;
inline constexpr int kRegisterOverheadMmaSync = 88;

// CTAs per SM ptxas must leave room for (.minnctapersm): as many as shared memory allows while the
// register budget that leaves (64K / (CTAs × threads), at most 255) still holds `need` per thread.
inline int ctas_per_sm(const std::string& arch, int shared_bytes, int threads, int need) {
  for (int n = sm_shared_bytes(arch) / (shared_bytes + kSharedReservedPerCta); n > 1; --n)
    if (std::min(255, 65536 / (n * threads) / 8 * 8) >= need) return n;
  return 1;
}

// setmaxnreg's split (PTX ISA §9.7.17.1) of a one-CTA-per-SM launch of `compute_threads` plus a
// producer warpgroup of 128: what the launch's allocation (64K / threads, in steps of 8) leaves each
// producer thread once each compute thread has `compute_registers`; 0 when that is under
// setmaxnreg's minimum of 24.
inline int producer_registers(int compute_threads, int compute_registers) {
  const int threads = compute_threads + 128;
  const int left = (65536 / threads / 8 * 8 * threads - compute_registers * compute_threads) / 128 / 8 * 8;
  return left >= 24 ? left : 0;
}

}  // namespace flashjit

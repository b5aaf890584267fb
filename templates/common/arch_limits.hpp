// Per-arch limits every template plans against (CUDA C Programming Guide, "Compute Capabilities").
#pragma once

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

}  // namespace flashjit

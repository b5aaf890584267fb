#include "support/knobs.hpp"

#include <cstdlib>
#include <map>
#include <mutex>

#include "flashjit/flashjit.hpp"
#include "support/text.hpp"

namespace flashjit::knob {

// X-macro: name, type, default, allowed, doc. Adding a knob here is the only way to read one.
#define FLASHJIT_KNOBS(X)                                                                          \
  X("FLASHJIT_LOG", "enum", "warn", "error|warn|info|debug",                                       \
    "log level on stderr; info logs every compile and launch with the kernel chosen and why")      \
  X("FLASHJIT_DUMP_DIR", "path", "", "",                                                           \
    "write every compile stage to DIR/<kernel-key>/<stage>.* (spec, check, llvm-ir, opt, ptx ...)") \
  X("FLASHJIT_OVERRIDE_DIR", "path", "", "",                                                       \
    "replace a stage's output with DIR/<kernel-key>/<stage>.* when that file exists (debugging)")  \
  X("FLASHJIT_CACHE_DIR", "path", "", "",                                                          \
    "root of the on-disk caches; default $XDG_CACHE_HOME/flashjit, else ~/.cache/flashjit")       \
  X("FLASHJIT_CACHE_MAX_BYTES", "size", "1GiB", "",                                              \
    "bound of the compiled-kernel cache; bytes or K/M/G/T (binary); least recently used evicted")   \
  X("FLASHJIT_AUTOTUNE", "enum", "quick", "off|quick|full",                                        \
    "autotuning: off = heuristic table; quick/full = stored tunings, else tune each shape bucket on first use") \
  X("FLASHJIT_MMA", "enum", "auto", "auto|sync",                                                    \
    "tensor-core instruction: auto = wgmma on sm_90a where the tile config allows, else mma.sync; sync = mma.sync") \
  X("FLASHJIT_PTXAS", "string", "auto", "",                                                         \
    "who assembles PTX: auto = the CUDA toolkit's ptxas (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin) when its release is 12.0 up to the driver's, else the driver's JIT; driver = always the driver's JIT; a path = that ptxas") \
  X("FLASHJIT_TIERED", "enum", "on", "on|off|quick",                                               \
    "on: where the compile cache does not hold the forward kernel Runtime::compile loads, and that kernel has a quick form (d <= 128 with a producer warpgroup: no rotated walk, the same results bit for bit, ~30% less compile time at d = 128), the quick form is loaded and returned while the full kernel compiles on a background thread; launches take the full one once it has loaded (Kernel::wait_full waits for it); off: Runtime::compile returns the full kernel; quick: the quick form only") \
  X("FLASHJIT_PDL", "enum", "auto", "auto|off",                                                     \
    "programmatic dependent launch: auto = the split-KV combine starts while the split kernel's last CTAs run (sm_90+, driver 12.3+); off = plain launches, one after the other") \
  X("FLASHJIT_PERSISTENT", "enum", "auto", "auto|off",                                              \
    "forward kernels with a producer warpgroup: auto = one CTA per SM, each walking tiles (the next tile's loads under this one's epilogue); off = one CTA per query tile") \
  X("FLASHJIT_TMA", "enum", "on", "on|off",                                                          \
    "on: sm_90a forward kernels load Q, K and V with the TMA unit (cp.async.bulk.tensor) through tensor maps encoded per launch, issued by the producer warpgroup or, in CTA-wide kernels (whole 64-column panels; not split, varlen, paged or GQA-packed), by the CTA's first thread; off: the producer's 128 threads or every thread copy them with cp.async") \
  X("FLASHJIT_BWD_WARPGROUPS", "enum", "on", "on|off",                                                \
    "on: backward tile configs of 64 keys on 8 warps (wgmma, d_qk + d_v > 256) give dV to one warpgroup and dK to the other in one dK/dV launch, and the heuristic takes them there; off: those configs are refused and such head dims take two dK/dV launches") \
  X("FLASHJIT_BWD_PRODUCER", "enum", "on", "on|off",                                                  \
    "on: the backward's dK/dV kernel (wgmma, 8 warps, head dims 64 or 128 or both 256, one CTA per SM, ptxas) gets a producer warpgroup that feeds Q, dO, LSE and D through an mbarrier ring; off: every thread copies and the warps meet at CTA barriers each step") \
  X("FLASHJIT_SCRATCH_KEEP", "size", "256MiB", "",                                                   \
    "device memory the launch scratch pool (split-KV partials, block maps, backward workspace) keeps between calls; 0 returns it at every synchronisation")

uint64_t parse_size(std::string_view text, std::string_view what) {
  auto bad = [&] {
    return Error(ErrorKind::usage, std::string(what) + "='" + std::string(text) +
                                       "' is not a size; use bytes or a number with K, M, G or T (e.g. 1GiB, 512M)");
  };
  size_t i = 0;
  uint64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (n > (UINT64_MAX - 9) / 10) throw bad();
    n = n * 10 + uint64_t(text[i++] - '0');
  }
  if (i == 0) throw bad();
  std::string_view unit = text.substr(i);
  int shift = 0;
  if (!unit.empty()) {
    const std::string_view letters = "KMGT";
    size_t k = letters.find(char(unit[0] & ~0x20));  // case-insensitive
    if (k == std::string_view::npos) {
      if (unit != "B" && unit != "b") throw bad();
    } else {
      shift = 10 * int(k + 1);
      std::string_view rest = unit.substr(1);
      if (!(rest.empty() || rest == "B" || rest == "iB" || rest == "b")) throw bad();
    }
  }
  if (shift && n > (UINT64_MAX >> shift)) throw bad();
  return n << shift;
}

const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = {
#define FLASHJIT_KNOB_ENTRY(n, t, d, a, doc) Entry{n, t, d, a, doc},
      FLASHJIT_KNOBS(FLASHJIT_KNOB_ENTRY)
#undef FLASHJIT_KNOB_ENTRY
  };
  return entries;
}

const std::string& get(const char* name) {
  static std::mutex mu;
  static std::map<std::string, std::string> values;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = values.find(name); it != values.end()) return it->second;
  for (const Entry& e : registry()) {
    if (std::string_view(e.name) != name) continue;
    const char* env = std::getenv(e.name);
    std::string value = (env && *env) ? env : e.default_value;
    if (std::string_view(e.type) == "enum") {
      auto allowed = split(e.allowed, '|');
      bool ok = false;
      for (auto& a : allowed) ok = ok || a == value;
      if (!ok)
        throw Error(ErrorKind::usage, std::string(e.name) + "='" + value + "' is not allowed; use one of " + e.allowed);
    }
    if (std::string_view(e.type) == "size") parse_size(value, e.name);  // throws naming the knob
    return values.emplace(name, value).first->second;
  }
  throw Error(ErrorKind::internal, std::string("internal error: knob ") + name +
                                       " is read but not registered in support/knobs.cpp (a flashjit bug)");
}

}  // namespace flashjit::knob

namespace flashjit {

std::vector<KnobInfo> knobs() {
  std::vector<KnobInfo> out;
  // knob::get reads and checks each value: a bad enum value throws here, whatever the caller reads.
  for (const auto& e : knob::registry()) out.push_back({e.name, e.type, e.default_value, knob::get(e.name), e.doc});
  return out;
}

}  // namespace flashjit

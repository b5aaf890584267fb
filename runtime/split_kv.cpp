#include "runtime/split_kv.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "templates/common/forward_abi.hpp"

namespace flashjit::rt {

int auto_splits(const SplitInputs& in) {
  const int64_t slots = int64_t(std::max(in.sms, 1)) * std::max(in.ctas_per_sm, 1);
  if (in.ctas <= 0 || double(in.ctas) >= 0.8 * double(slots)) return 1;
  const int64_t most = std::min<int64_t>({kMaxSplits, slots, in.key_tiles});
  if (most <= 1) return 1;
  auto longest = [&](int64_t s) { return (in.key_tiles + s - 1) / s; };
  // A count is worth trying only if it shortens the longest split (fewer tiles per CTA).
  auto eligible = [&](int64_t s) { return s == 1 || longest(s) != longest(s - 1); };
  std::vector<double> efficiency(size_t(most) + 1, 0.0);
  double best = 0;
  for (int64_t s = 1; s <= most; ++s) {
    if (!eligible(s)) continue;
    const double waves = double(in.ctas * s) / double(slots);
    efficiency[size_t(s)] = waves / std::ceil(waves);
    best = std::max(best, efficiency[size_t(s)]);
  }
  for (int64_t s = 1; s <= most; ++s)
    if (eligible(s) && efficiency[size_t(s)] >= 0.85 * best) return int(s);
  return 1;
}

bool pack_gqa_pays(int64_t seq_q, int64_t group, int block_m) {
  if (group <= 1 || seq_q <= 0 || block_m <= 0) return false;
  auto fill = [&](int64_t rows) { return double(rows) / double((rows + block_m - 1) / block_m * block_m); };
  return fill(seq_q) < 0.9 * fill(seq_q * group);
}

std::string describe_splits(int splits, bool automatic) {
  const char* why = automatic ? " (automatic)" : " (given)";
  return splits > 1 ? "split-KV into " + std::to_string(splits) + why : std::string("no split") + why;
}

}  // namespace flashjit::rt

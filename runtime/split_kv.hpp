// Split-KV's decision (Flash-Decoding): how many pieces each row's keys are split into when the
// query side alone cannot fill the GPU.
#pragma once

#include <cstdint>
#include <string>

namespace flashjit::rt {

struct SplitInputs {
  int64_t ctas = 0;       // CTAs of the unsplit launch: query tiles × heads × batch
  int64_t key_tiles = 0;  // block_n-wide key tiles of a row: ceil(seq_kv / block_n)
  int sms = 0;            // the device's SM count
  int ctas_per_sm = 0;    // the kernel's occupancy (0: unknown, taken as 1)
};

// FlashAttention-2's rule (num_splits_heuristic, flash_api.cpp): no split once the launch fills
// 80% of the CTA slots; otherwise the fewest splits whose last wave is at least 85% as full as
// the best candidate's, never more than the key tiles (a split must walk one) or kMaxSplits, and
// skipping counts that do not shorten the longest split.
int auto_splits(const SplitInputs& in);

// Whether packing a GQA group's `group` query heads into a CTA's rows fills the block_m-row
// tiles better: FlashAttention-3's rule (should_pack_gqa, flash_api.cpp), pack when the
// unpacked tiles are less than 90% as full as the packed ones (decode: seq_q of 1 fills 1 row of 64).
bool pack_gqa_pays(int64_t seq_q, int64_t group, int block_m);

// "split-KV 8 (auto)", "no split (given)" …: what FLASHJIT_LOG=info reports per launch.
std::string describe_splits(int splits, bool automatic);

}  // namespace flashjit::rt

// How a forward launch is shaped when the query side alone cannot fill the GPU (decode): GQA
// packing (FlashAttention-3's pack_gqa) and split-KV (Flash-Decoding), each a module of its own
// beside the bucket's kernel (Target::pack_gqa, Target::split_kv).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/dispatch.hpp"

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

// The block_m-row query tiles of a (GQA-packed) head in the grid of the module launched. Its own
// config counts, not the bucket's: KernelDispatch::variant gives a packed or split form the
// heuristic's tile for that form, which may be shorter, and the split kernel takes its query tile
// count from grid x / splits, so a grid sized for the bucket's taller tiles leaves rows unwritten.
int64_t query_tiles(int64_t seq_q, int64_t group, const TileConfig& launched);

// A forward launch's kernel and grid.
struct ForwardShape {
  KernelDispatch::Choice pick;  // the module to launch (the bucket's, or its packed/split form)
  int group = 1;                // query heads packed per CTA
  int splits = 1;
  // Split: the combine is launched with programmatic stream serialization (FLASHJIT_PDL=auto, the
  // module waits for the partials on the device, driver 12.3+).
  bool combine_early = false;
  int64_t heads_y = 0;          // grid y: heads_q, or heads_kv when packed
  int64_t q_tiles = 0;          // block_m-row tiles of a (packed) head; grid x = q_tiles · splits
  std::string note;             // for FLASHJIT_LOG=info: ", split-KV into 4 (automatic), GQA packing 4"
};

// Starts from the bucket's choice: packs when it pays and the spec allows it, splits as
// args.num_splits says (0: auto_splits on the unsplit kernel's occupancy). A module not loaded yet
// is not loaded while the stream captures a CUDA graph: that launch runs unpacked and unsplit,
// with a warning.
ForwardShape shape_forward(const KernelDispatch& dispatch, const KernelDispatch::Choice& bucket, const AnalyzedSpec& spec,
                           const Context& ctx, const ForwardArgs& args);

}  // namespace flashjit::rt

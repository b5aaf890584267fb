#include "runtime/split_kv.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "compiler/kernel_template.hpp"
#include "runtime/context.hpp"
#include "support/knobs.hpp"
#include "support/log.hpp"
#include "templates/common/forward_abi.hpp"
#include "templates/fwd/plan.hpp"

namespace flashjit::rt {

namespace {

// Whether the split-KV combine of kernel `c` is launched with programmatic stream serialization
// (FLASHJIT_PDL=auto): its module waits for the partials on the device (combine_waits_on_device
// for c's arch) and the driver is CUDA 12.3 or newer, the first to keep that dependency when a
// stream is captured into a graph.
bool combine_starts_early(const Context& ctx, const CompiledKernel& c) {
  static const bool allowed = knob::get("FLASHJIT_PDL") == "auto";
  return allowed && ctx.info.driver_version >= 12030 && combine_waits_on_device(sm_number(c.arch));
}

}  // namespace

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

int64_t query_tiles(int64_t seq_q, int64_t group, const TileConfig& launched) {
  return (seq_q * group + launched.block_m - 1) / launched.block_m;
}

bool pack_gqa_pays(int64_t seq_q, int64_t group, int block_m) {
  if (group <= 1 || seq_q <= 0 || block_m <= 0) return false;
  auto fill = [&](int64_t rows) { return double(rows) / double((rows + block_m - 1) / block_m * block_m); };
  return fill(seq_q) < 0.9 * fill(seq_q * group);
}

ForwardShape shape_forward(const KernelDispatch& dispatch, const KernelDispatch::Choice& bucket, const AnalyzedSpec& spec,
                           const Context& ctx, const ForwardArgs& args) {
  ForwardShape f;
  f.pick = bucket;
  const TileConfig& c = bucket.compiled->config;
  const int64_t group = args.heads_q / args.heads_kv;
  // Varlen: a (packed) head's rows and keys are at most the longest sequence's.
  const bool varlen = args.cu_seqlens_q != nullptr;
  const int64_t seq_q = varlen ? args.max_seqlen_q : args.seq_q, seq_kv = varlen ? args.max_seqlen_kv : args.seq_kv;
  std::string pack_note;
  if (group > 1 && seq_q * group <= INT32_MAX && pack_gqa_pays(seq_q, group, c.block_m)) {
    if (std::optional<std::string> why = gqa_packing_blocker(spec)) pack_note = ", no GQA packing: " + *why;
    else f.group = int(group);
  }
  f.heads_y = f.group > 1 ? args.heads_kv : args.heads_q;
  f.q_tiles = query_tiles(seq_q, f.group, c);
  // Given, else the bucket's tuned count (at most one split per key tile: the bucket's shapes have
  // down to half the tuned one's keys), else FlashAttention-2's rule.
  const int64_t key_tiles = (seq_kv + c.block_n - 1) / c.block_n;
  f.splits = args.num_splits != 0 ? args.num_splits
             : bucket.splits > 0  ? int(std::max<int64_t>(1, std::min<int64_t>(bucket.splits, key_tiles)))
                                  : auto_splits({f.q_tiles * f.heads_y * args.batch, key_tiles, ctx.info.sm_count,
                                                 bucket.loaded->ctas_per_sm});
  const bool paged = args.block_table != nullptr;
  if (f.group > 1 || f.splits > 1 || varlen || paged) {
    KernelDispatch::Choice v =
        dispatch.variant(bucket, {f.group, f.splits > 1, varlen, paged, paged ? int(args.page_size) : 0}, args.stream);
    if (v.compiled) {
      f.pick = v;
      f.q_tiles = query_tiles(seq_q, f.group, v.compiled->config);
    } else if (varlen || paged) {
      throw Error(ErrorKind::usage, std::string("forward: the ") + (varlen ? "varlen" : "paged") +
                                        " kernel of bucket config " + c.str() +
                                        " is not loaded yet and the stream is capturing a CUDA graph (loading it would "
                                        "break the capture); run one such call of these sizes before capturing");
    } else {
      log::warn("forward: the " + std::string(f.group > 1 ? "GQA-packed" : "split-KV") + " kernel of bucket config " +
                c.str() + " is not loaded yet and the stream is capturing a CUDA graph: this launch runs the unsplit, "
                "unpacked kernel (run one call before capturing)");
      f.group = f.splits = 1;
      f.heads_y = args.heads_q;
      f.q_tiles = query_tiles(args.seq_q, 1, c);
      pack_note = ", not packed or split: capturing";
    }
  }
  const char* why = args.num_splits != 0 ? " (given)" : bucket.splits > 0 ? " (tuned)" : " (automatic)";
  f.combine_early = f.splits > 1 && combine_starts_early(ctx, *f.pick.compiled);
  const char* combine = f.combine_early ? ", combine launched early" : "";
  f.note = ", " + (f.splits > 1 ? "split-KV into " + std::to_string(f.splits) + why + combine : std::string("no split") + why) +
           (f.group > 1 ? ", GQA packing " + std::to_string(f.group) : pack_note) + (varlen ? ", varlen" : "") + (paged ? ", paged K/V" : "");
  return f;
}

}  // namespace flashjit::rt

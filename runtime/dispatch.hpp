// Kernel::forward's choice of tile config per shape bucket: a given config, or the heuristic with
// autotune off; else a stored tuning (the tuning cache, memoised), or one tuned on first use of
// the bucket (FLASHJIT_AUTOTUNE=quick|full); the chosen config compiled and loaded once.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>

#include "autotune/search.hpp"
#include "autotune/tuning_key.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/handles.hpp"

namespace flashjit::rt {

// Whether `stream` is capturing a CUDA graph. An error (e.g. the legacy stream while another
// stream captures in global mode) counts as capturing: tuning then would break the capture.
bool stream_capturing(const Context& ctx, void* stream);

// Owned by a Kernel. `base` is the kernel Runtime::compile built (heuristic or given config); the
// dispatch borrows it and owns the modules of other configs it loads. select() takes a shared lock
// for the lookup (an exclusive one only to add a bucket); the launch that follows is lock-free.
class KernelDispatch {
 public:
  // `upgrade`, when not null, is the full kernel of a tiered compile whose quick form `base` is:
  // once it has loaded, choices of the base kernel take it instead.
  KernelDispatch(std::shared_ptr<Context> ctx, KernelSource source, DispatchOptions dispatch,
                 const CompiledKernel* base, const LoadedModule* base_loaded, const Upgrade* upgrade = nullptr);
  ~KernelDispatch();
  KernelDispatch(const KernelDispatch&) = delete;
  KernelDispatch& operator=(const KernelDispatch&) = delete;

  struct Choice {
    const CompiledKernel* compiled = nullptr;  // valid as long as the dispatch
    const LoadedModule* loaded = nullptr;
    const std::string* why = nullptr;          // "heuristic ...", "tuned 2025-01-31 (quick, 1.234 ms)", "given ..."
    int splits = 0;                            // the bucket's tuned split-KV count; 0: automatic
    bool tuned = false;                        // the config is a tuning's (stored or just run)
  };
  // The kernel for this call's shape bucket. On the bucket's first call: tuning cache lookup, then
  // (mode quick/full, tune_on_first_use) tuning with the call's params/tensors, then the module.
  // A tuning that fails entirely keeps the base kernel, with a warning.
  Choice select(const ForwardArgs& args) const;
  // `c`'s tile config compiled in the forward's serving forms: GQA packing of `group` query heads
  // per CTA (Target::pack_gqa; 1: none), split-KV (Target::split_kv), packed sequences
  // (Target::varlen) and a paged K/V cache (Target::paged); compiled and loaded on first use, then
  // kept. Where `c` is the base form's heuristic tile, neither given nor tuned, the form gets the
  // heuristic's tile for itself, which may differ (its `why` then says so). A module not loaded
  // yet is not loaded while `stream` captures a CUDA graph (a load would break the capture):
  // compiled is then null. The capture is queried only then, not per launch.
  struct Form {
    int group = 1;        // Target::pack_gqa
    bool split = false;   // Target::split_kv
    bool varlen = false;  // Target::varlen
    bool paged = false;   // Target::paged
    int page_size = 0;    // Target::page_size
  };
  Choice variant(const Choice& c, const Form& form, void* stream) const;

 private:
  struct Loaded;
  // `config` for `target`, compiled and loaded (no lock taken), its config_reason `reason`.
  std::unique_ptr<Loaded> load(const Target& target, const TileConfig& config, std::string reason) const;
  Choice pick(const ForwardArgs& args) const;  // select() before the upgrade
  Choice choose(const ForwardArgs& args, const autotune::TuningKey& key) const;
  // Autotune off, a shape the table's row does not serve (decode, short masked walks, long unmasked
  // ones): the heuristic's config for it (forward_shape_heuristic), its module loaded on first use;
  // nothing where the table's config serves, or while `args.stream` captures a graph and the module
  // is not loaded yet (with a warning).
  std::optional<Choice> shape_choice(const ForwardArgs& args) const;
  // The config for the bucket and why: a stored tuning, a tuning now, or the base's.
  // `*splits`: the tuning's split-KV count (0: automatic); `*tuned`: set when a tuning chose it.
  TileConfig decide(const ForwardArgs& args, const autotune::TuningKey& key, std::string* why, bool* memoise,
                    int* splits, bool* tuned) const;
  std::shared_ptr<Context> ctx_;
  KernelSource source_;
  DispatchOptions dispatch_;
  autotune::TuneMode mode_;
  const CompiledKernel* base_;
  const LoadedModule* base_loaded_;
  const Upgrade* upgrade_;
  std::string base_why_;
  mutable std::shared_mutex mu_;    // guards buckets_ and modules_
  mutable std::mutex tune_mu_;      // one bucket decided at a time (tuning uses the whole GPU)
  mutable std::map<std::string, Choice> buckets_;        // bucket text → choice
  mutable std::map<std::string, std::string> whys_;      // bucket text → reason (stable storage)
  mutable std::set<std::string> unmemoised_whys_;        // reasons of calls that decided nothing
  mutable std::set<std::string> shape_whys_;             // shape_choice's reasons, one per row
  mutable std::map<std::string, std::unique_ptr<Loaded>> modules_;  // config name → module
};

}  // namespace flashjit::rt

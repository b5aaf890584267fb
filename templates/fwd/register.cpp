// The forward template, its block-map pre-pass and its split-KV combine, registered with the pipeline.
#include "compiler/kernel_template.hpp"
#include "templates/fwd/block_map.hpp"
#include "templates/fwd/combine.hpp"
#include "templates/fwd/forward.hpp"
#include "templates/fwd/plan.hpp"

namespace flashjit {

namespace {

// Bump a version whenever that template's generated code changes: its cached kernels then miss.
constexpr const char* kForwardVersion = "fwd-42";
constexpr const char* kBlockMapVersion = "map-6";
constexpr const char* kCombineVersion = "combine-6";

class ForwardKernelPlan final : public KernelPlan {
 public:
  explicit ForwardKernelPlan(ForwardPlan p) : p_(std::move(p)) {}

  std::vector<std::string> template_versions() const override {
    std::vector<std::string> v = {std::string("attention_fwd@") + kForwardVersion};
    if (p_.target.split_kv) v.push_back(std::string("split_combine@") + kCombineVersion);
    if (p_.has_map()) v.push_back(std::string("block_map@") + kBlockMapVersion);
    return v;
  }
  std::string variant() const override {
    // "+producer": whether a plan gets one also depends on the assembler (Target::moves_registers).
    // "+tma": FLASHJIT_TMA decides the producer's loads and the kernel's parameters.
    return std::string(p_.wgmma ? "wgmma" : "mma.sync") + (p_.producer ? "+producer" : "") + (p_.tma ? "+tma" : "") +
           (p_.target.pack_gqa > 1 ? "+gqa" + std::to_string(p_.target.pack_gqa) : "") +
           (p_.target.split_kv ? "+split" : "") + (p_.target.varlen ? "+varlen" : "") +
           (p_.target.paged ? "+paged" + (p_.target.page_size ? std::to_string(p_.target.page_size) : "") : "") +
           (p_.quick ? "+quick" : "");
  }
  std::string describe() const override { return p_.describe(); }
  // Neither NVPTX's level nor ptxas' can change the quick form's results: the IR has no contract
  // flags (llvm.fma where an fma is meant), so NVPTX gives every f32 add, sub and mul .rn, which
  // the PTX ISA exempts from fusing into fma at any ptxas level (add.f32's rounding modifiers; the
  // [codegen][tiered] test checks the PTX). Together they take ~10% off the quick form's compile
  // (docs/perf-notes.md §67).
  bool quick() const override { return p_.quick; }
  LaunchFacts launch() const override {
    const BlockMapPolicy& map = p_.spec->block_map;
    return {.threads = p_.threads,
            .shared_bytes = p_.shared_bytes,
            .has_map = map.needed,
            .map_per_batch = map.needed && map.per_batch,
            .map_per_head = map.needed && map.per_head,
            .persistent = p_.persistent,
            .tensor_maps = p_.tensor_maps(),
            .has_combine = p_.target.split_kv};
  }
  void emit(llvm::Module& module, const std::string& entry) const override {
    emit_attention_forward(module, p_, entry);
    if (p_.target.split_kv) emit_split_combine(module, p_, entry);
    if (p_.has_map()) emit_block_map(module, p_, entry);
  }

 private:
  ForwardPlan p_;
};

const bool kRegistered = [] {
  register_template({"attention_fwd", kForwardVersion, "fwd", forward_heuristic, check_forward_shape,
                     forward_search_space,
                     [](const AnalyzedSpecPtr& spec, const TileConfig& c, const Target& t) -> std::unique_ptr<KernelPlan> {
                       return std::make_unique<ForwardKernelPlan>(plan_forward(spec, c, t));
                     }});
  // Emitted only into forward modules (same parameters and grid); registered for its version.
  register_template({"block_map", kBlockMapVersion, "fwd", nullptr, nullptr, nullptr, nullptr});
  register_template({"split_combine", kCombineVersion, "fwd", nullptr, nullptr, nullptr, nullptr});
  return true;
}();

}  // namespace

}  // namespace flashjit

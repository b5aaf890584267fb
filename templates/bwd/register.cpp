// The backward template, registered with the pipeline.
#include "compiler/kernel_template.hpp"
#include "templates/bwd/backward.hpp"
#include "templates/bwd/plan.hpp"

namespace flashjit {

namespace {

// Bump whenever the backward's generated code changes: its cached kernels then miss.
constexpr const char* kBackwardVersion = "bwd-10";

class BackwardKernelPlan final : public KernelPlan {
 public:
  explicit BackwardKernelPlan(BackwardPlan p) : p_(std::move(p)) {}

  std::vector<std::string> template_versions() const override {
    return {std::string("attention_bwd@") + kBackwardVersion};
  }
  std::string variant() const override {
    return std::string(p_.kv.wgmma ? "wgmma" : "mma.sync") + (p_.kv.producer ? "+producer" : "") + "/" +
           (p_.q.wgmma ? "wgmma" : "mma.sync");
  }
  std::string describe() const override { return p_.describe(); }
  // The main entry is the dK/dV kernel; the runtime finds the others by backward_entries().
  LaunchFacts launch() const override { return {.threads = p_.kv.threads, .shared_bytes = p_.kv.shared_bytes}; }
  void emit(llvm::Module& module, const std::string& entry) const override {
    emit_attention_backward(module, p_, entry);
  }

 private:
  BackwardPlan p_;
};

const bool kRegistered = register_template(
    {"attention_bwd", kBackwardVersion, "bwd", backward_heuristic, check_backward_shape, backward_search_space,
     [](const AnalyzedSpecPtr& spec, const TileConfig& c, const Target& t) -> std::unique_ptr<KernelPlan> {
       return std::make_unique<BackwardKernelPlan>(plan_backward(spec, c, t));
     }});

}  // namespace

}  // namespace flashjit

#include "compiler/kernel_key.hpp"

#include <llvm/Config/llvm-config.h>

#include "compiler/codegen/target.hpp"
#include "support/hash.hpp"

namespace flashjit {

KernelKey make_kernel_key(const AnalyzedSpec& spec, const KernelPlan& plan, const TileConfig& config,
                          const std::string& arch) {
  std::string templates;
  for (const std::string& t : plan.template_versions()) templates += (templates.empty() ? "" : " ") + t;
  KernelKey k;
  k.text = std::string("flashjit=") + FLASHJIT_VERSION + "\nllvm=" + LLVM_VERSION_STRING +
           "\nptx_isa=" + codegen::ptx_isa_version(arch) + "\narch=" + arch + "\ntemplates=" + templates +
           "\nvariant=" + plan.variant() + "\nconfig=" + config.str() + "\nspec:\n" + spec.canonical_unnamed;
  k.hash = sha256_hex(k.text).substr(0, 16);
  return k;
}

}  // namespace flashjit

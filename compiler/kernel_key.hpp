// The kernel key: everything that decides a kernel's code, as text, and the hash that names it
// (entry point, dump folder). The compile cache keys its entries by the same text.
#pragma once

#include <string>

#include "compiler/analyzed_spec.hpp"
#include "compiler/kernel_template.hpp"

namespace flashjit {

struct KernelKey {
  std::string text;  // "name=value" lines; the spec's canonical YAML (name cleared) last
  std::string hash;  // 16 hex digits of SHA-256(text)
};

// flashjit, LLVM and PTX ISA versions, arch, the versions of the templates in the module, the
// plan's variant (the instruction kind), the tile config and the spec.
KernelKey make_kernel_key(const AnalyzedSpec& spec, const KernelPlan& plan, const TileConfig& config,
                          const std::string& arch);

}  // namespace flashjit

// The compiler's stage list (DESIGN §2); compile_to_ptx in flashjit.hpp is its public face.
#pragma once

#include "flashjit/flashjit.hpp"

namespace flashjit {

// Stage names, in order, as dumped under FLASHJIT_DUMP_DIR/<key>/ (the runtime adds cubin, module).
inline constexpr const char* kStages[] = {"spec", "check", "instantiate", "llvm-ir", "opt", "ptx"};

// kTemplateVersion: bumped whenever a template's generated code changes; part of every cache key
// (runtime/kernel_cache.cpp).
const char* template_version();

}  // namespace flashjit

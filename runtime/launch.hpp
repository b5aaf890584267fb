// Checks a forward call (shapes, strides, alignment) and packs the kernel's parameters.
#pragma once

#include "flashjit/flashjit.hpp"
#include "templates/forward_abi.hpp"

namespace flashjit::rt {

// Throws Error(usage) naming the offending argument and what is allowed.
ForwardParams pack_forward(const AttentionSpec& spec, const ForwardArgs& a);

}  // namespace flashjit::rt

// The sequence a forward CTA works on, as the launch describes it: packed sequences
// (Target::varlen, FlashAttention's varlen API) take their token offsets and lengths from
// cu_seqlens; a paged K/V cache (Target::paged, vLLM's layout) takes the key count from
// seqused_kv when given and the pages from the sequence's row of the block table.
#pragma once

#include "compiler/tile/emitter.hpp"

namespace flashjit {

struct SequenceView {
  llvm::Value* seq_q = nullptr;       // this sequence's query rows and keys (i32)
  llvm::Value* seq_kv = nullptr;
  llvm::Value* q0 = nullptr;          // varlen: its first token in q/o and in k/v
  llvm::Value* kv0 = nullptr;
  llvm::Value* page_table = nullptr;  // paged: its row of the block table
};

// Emitted at the kernel's entry, `batch` the CTA's sequence; reads the kernel's parameters
// (templates/common/forward_abi.hpp).
SequenceView sequence_view(tile::Emitter& e, llvm::Function* fn, llvm::Value* batch, bool varlen, bool paged);

}  // namespace flashjit

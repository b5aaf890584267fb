// The combine step of split-KV (Flash-Decoding, Dao et al. 2023): merges the num_splits partial
// results of each query row, O = Σ_s e^{LSE_s − LSE} O_s with LSE = ln Σ_s e^{LSE_s} — the online
// softmax's rescaling applied once across splits, so the answer is the unsplit one.
#pragma once

#include "templates/fwd/plan.hpp"

namespace llvm {
class Module;
class Function;
}  // namespace llvm

namespace flashjit {

// Adds kernel `entry + "_combine"` with the forward kernel's parameter list; its grid and block
// and block are seq_q × heads_q × batch / kCombineThreads threads, with kCombineSharedBytes of
// dynamic shared memory (templates/common/forward_abi.hpp).
llvm::Function* emit_split_combine(llvm::Module& module, const ForwardPlan& plan, const std::string& entry);

}  // namespace flashjit

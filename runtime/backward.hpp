// The backward module of a Kernel: compiled (through the compile cache) and loaded on first use,
// then shared read-only by every Kernel::backward call.
#pragma once

#include <memory>

#include "runtime/handles.hpp"
#include "runtime/module.hpp"
#include "templates/bwd/plan.hpp"

namespace flashjit::rt {

struct BackwardModule {
  std::shared_ptr<Context> ctx;
  CompiledKernel compiled;
  LoadedModule loaded;           // function: the dK/dV kernel (dK only when split)
  cu::CUfunction dv = nullptr;   // dV only, when the plan splits dK and dV
  cu::CUfunction dq = nullptr, prep = nullptr;
  cu::CUfunction map_q = nullptr, map_kv = nullptr;  // masks with a block map
  BackwardPlan plan;             // the launch geometry of each kernel
  int registers = 0, spill_bytes = 0;           // of the dK/dV kernel
  int dq_registers = 0, dq_spill_bytes = 0;
  ~BackwardModule();
};

// The kernel's backward module, compiling and loading it under Kernel::Impl::backward_mu the first time.
const BackwardModule& backward_module(const detail::Access::KernelImpl& k);

}  // namespace flashjit::rt

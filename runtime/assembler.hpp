// Who turns generated PTX into a cubin: the CUDA toolkit's ptxas, or the driver's JIT (cuLink).
// They are not equal: the H200's driver JIT (580.159.04) allocates registers for the launch's
// ceiling and ignores setmaxnreg (PTX ISA §9.7.17.1), so a warp-specialised kernel whose compute
// warps need more than 65536 / threads registers spills under it and not under ptxas 13.0
// (docs/perf-notes.md §13).
#pragma once

#include <string>

#include "compiler/kernel_template.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit::rt {

struct Assembler {
  std::string ptxas;    // the program; "" = the driver's JIT
  std::string version;  // ptxas' "13.0.88"
  std::string why;      // how FLASHJIT_PTXAS chose it, for the log
  // "ptxas 13.0.88" or "driver": part of the compile cache's key (the two give different cubins).
  std::string id() const { return ptxas.empty() ? "driver" : "ptxas " + version; }
};

// FLASHJIT_PTXAS for a driver of `driver_version` (cuDriverGetVersion), decided once per process:
// auto (the default) takes the first of ptxas::find_all() whose release is at least 12.0 (PTX ISA
// 8.0, sm_90a) and at most the driver's (a newer assembler's cubin may not load), else the driver;
// "driver" is always the driver; anything else is the path of a ptxas, Error(usage) when it does
// not run.
const Assembler& assembler(int driver_version);
// The choice itself, for a given FLASHJIT_PTXAS value (tests).
Assembler choose_assembler(const std::string& knob_value, int driver_version);

// The target `options` ask for on this device (target_for with its arch), with
// Target::moves_registers from the assembler chosen for its driver.
Target device_target(const CompileOptions& options, const DeviceInfo& info);

}  // namespace flashjit::rt

// `flashjit info`: what this machine offers and where flashjit keeps things.
#include <iostream>

#include "tools/cli.hpp"

namespace flashjit::cli {

int cmd_info(int argc, char** argv) {
  Args a = parse_args(argc, argv, 2, {"--device"}, {"--help"});
  if (a.has("--help")) {
    std::cout << "usage: flashjit info [--device N]\n"
                 "Prints flashjit, LLVM and PTX versions, the cache location, every FLASHJIT_* knob, and the\n"
                 "device's name, compute capability, SM count, shared memory and driver version.\n"
                 "Exits 69 when there is no CUDA driver or device (the rest is still printed).\n";
    return kOk;
  }
  VersionInfo v = versions();
  std::cout << "flashjit " << v.flashjit << "\n"
            << "LLVM " << v.llvm << " (NVPTX, linked in)\n"
            << "PTX ISA " << v.ptx_isa << " (sm_80 ... sm_90a)\n"
            << "cache dir " << cache_dir() << "\n"
            << "ptxas " << (find_ptxas().empty() ? "not found" : find_ptxas()) << "\n"
            << "knobs:\n";
  for (const KnobInfo& k : knobs()) std::cout << "  " << k.name << "=" << k.value << "\n";
  try {
    Runtime rt = Runtime::create(static_cast<int>(a.get_int("--device", 0)));
    const DeviceInfo& d = rt.device();
    std::cout << "device " << d.ordinal << ": " << d.name << "\n"
              << "  compute capability " << d.cc_major << "." << d.cc_minor << " (flashjit target " << d.arch() << ")\n"
              << "  SMs " << d.sm_count << "\n"
              << "  shared memory per block " << d.shared_per_block << " B (opt-in " << d.shared_per_block_optin
              << " B), per SM " << d.shared_per_sm << " B\n"
              << "  L2 " << d.l2_bytes / (1024 * 1024) << " MiB\n"
              << "  driver " << d.driver_version / 1000 << "." << (d.driver_version % 1000) / 10 << " (CUDA API "
              << d.driver_version << ")\n";
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::no_gpu) throw;
    std::cout << "device: none (" << e.what() << ")\n";
    return kNoGpu;
  }
  return kOk;
}

}  // namespace flashjit::cli

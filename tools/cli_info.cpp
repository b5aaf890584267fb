// `flashjit info`: what this machine offers and where flashjit keeps things.
#include <climits>
#include <iostream>
#include <memory>

#include "tools/cli.hpp"
#include "tools/cli_json.hpp"

namespace flashjit::cli {

namespace {

// --json: the same facts as one object; "device" is null (and "device_error" says why) without a GPU.
int info_json(int device) {
  VersionInfo v = versions();
  JsonObject j, knob_values;
  const std::string ptxas = find_ptxas();
  j.str("flashjit", v.flashjit).str("llvm", v.llvm).str("ptx_isa", v.ptx_isa).str("cache_dir", cache_dir());
  if (ptxas.empty()) j.null("ptxas");
  else j.str("ptxas", ptxas);
  for (const KnobInfo& k : knobs()) knob_values.str(k.name, k.value);
  j.raw("knobs", knob_values.dump());
  int rc = kOk;
  try {
    Runtime rt = Runtime::create(device);
    const DeviceInfo& d = rt.device();
    j.raw("device", JsonObject().integer("ordinal", d.ordinal).str("name", d.name)
                        .str("compute_capability", std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor))
                        .str("arch", d.arch()).integer("sm_count", d.sm_count)
                        .integer("shared_per_block", d.shared_per_block)
                        .integer("shared_per_block_optin", d.shared_per_block_optin)
                        .integer("shared_per_sm", d.shared_per_sm).integer("l2_bytes", d.l2_bytes)
                        .integer("driver_version", d.driver_version).dump());
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::no_gpu) throw;
    j.null("device").str("device_error", e.what());
    rc = kNoGpu;
  }
  std::cout << j.dump() << "\n";
  return rc;
}

int info(int device) {
  VersionInfo v = versions();
  std::string cache;
  try {
    cache = cache_dir();
  } catch (const Error& e) {  // no absolute folder for it: info still reports the rest
    cache = std::string("none (") + e.what() + ")";
  }
  const std::string ptxas = find_ptxas();
  std::cout << "flashjit " << v.flashjit << "\n"
            << "LLVM " << v.llvm << " (NVPTX, linked in)\n"
            << "PTX ISA " << v.ptx_isa << " (sm_80 ... sm_90a)\n"
            << "cache dir " << cache << "\n"
            << "ptxas " << (ptxas.empty() ? "not found" : ptxas) << "\n"
            << "knobs:\n";
  for (const KnobInfo& k : knobs()) std::cout << "  " << k.name << "=" << k.value << "\n";
  try {
    Runtime rt = Runtime::create(device);
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

}  // namespace

Command add_info(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("info", "devices, driver, compute capability, LLVM/PTX versions, cache location");
  sub->footer(
      "Prints flashjit, LLVM and PTX versions, the cache location, every FLASHJIT_* knob, and the\n"
      "device's name, compute capability, SM count, shared memory and driver version.\n"
      "Exits 69 when there is no CUDA driver or device (the rest is still printed).");
  auto device = std::make_shared<int>(0);
  sub->add_option("--device", *device, "CUDA device ordinal")
      ->type_name("N")
      ->check(integer_in(0, INT_MAX))
      ->capture_default_str();
  auto json = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "print one JSON object (device null without a GPU)");
  return {sub, [device, json] { return *json ? info_json(*device) : info(*device); }};
}

}  // namespace flashjit::cli

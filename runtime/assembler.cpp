#include "runtime/assembler.hpp"

#include <map>
#include <mutex>

#include "compiler/pipeline.hpp"
#include "flashjit/flashjit.hpp"
#include "support/knobs.hpp"
#include "support/log.hpp"
#include "support/ptxas.hpp"

namespace flashjit::rt {
namespace {

constexpr int kMinRelease = 12000;  // PTX ISA 8.0, the version flashjit emits, and sm_90a

std::string release_text(int r) { return std::to_string(r / 1000) + "." + std::to_string(r % 1000 / 10); }

}  // namespace

Assembler choose_assembler(const std::string& knob, int driver_version) {
  Assembler a;
  if (knob == "driver") {
    a.why = "FLASHJIT_PTXAS=driver";
    return a;
  }
  if (knob != "auto") {
    const ptxas::Version v = ptxas::version(knob);
    if (v.release == 0)
      throw Error(ErrorKind::usage, "FLASHJIT_PTXAS='" + knob + "' is not a ptxas that runs (`" + knob +
                                        " --version` failed or printed no release); use auto, driver or the path "
                                        "of the CUDA toolkit's ptxas");
    a.ptxas = knob;
    a.version = v.text;
    a.why = "FLASHJIT_PTXAS names it";
    return a;
  }
  std::string passed;  // the candidates outside the window, for the log
  for (const std::string& found : ptxas::find_all()) {
    const ptxas::Version v = ptxas::version(found);
    if (v.release < kMinRelease || v.release > driver_version) {
      passed += (passed.empty() ? "" : ", ") + found + " is release " +
                (v.release ? release_text(v.release) : "unknown");
      continue;
    }
    a.ptxas = found;
    a.version = v.text;
    a.why = "found " + found;
    return a;
  }
  a.why = passed.empty() ? "no ptxas on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin"
                         : passed + "; auto takes " + release_text(kMinRelease) + " up to the driver's " +
                               release_text(driver_version);
  return a;
}

const Assembler& assembler(int driver_version) {
  static std::mutex mu;
  static std::map<int, Assembler> chosen;
  std::lock_guard<std::mutex> lock(mu);
  auto it = chosen.find(driver_version);
  if (it == chosen.end()) {
    it = chosen.emplace(driver_version, choose_assembler(knob::get("FLASHJIT_PTXAS"), driver_version)).first;
    log::info("PTX assembler: " + it->second.id() + " (" + it->second.why + ")");
  }
  return it->second;
}

Target device_target(const CompileOptions& options, const DeviceInfo& info) {
  Target t = target_for(options, info.arch());
  t.moves_registers = !assembler(info.driver_version).ptxas.empty();
  return t;
}

}  // namespace flashjit::rt

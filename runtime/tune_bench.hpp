// The autotuner's bench for one tuning job: inputs (several sets that together exceed the L2), an
// L2 flush, each candidate config compiled and loaded, its output (poisoned before it runs)
// checked against the fp64 reference under the tests' rule, and its launches timed with CUDA events.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autotune/search.hpp"
#include "flashjit/reference.hpp"
#include "runtime/tuner.hpp"

namespace flashjit::rt {

class TuneBench {
 public:
  TuneBench(const Runtime& runtime, std::shared_ptr<Context> ctx, const TuneJob& job);
  ~TuneBench();
  TuneBench(const TuneBench&) = delete;
  TuneBench& operator=(const TuneBench&) = delete;

  // The resource model: the plan's limits, shared memory, then registers/spills from the driver.
  std::optional<std::string> prune(const TileConfig& c);
  // A hash of the config's binary (kernel names blanked): configs with equal code are timed once.
  std::string fingerprint(const TileConfig& c);
  // Warm-up, output check, then timed launches with an L2 flush before each.
  autotune::Measurement measure(const TileConfig& c);

 private:
  struct Built {
    std::optional<Kernel> kernel;
    std::string error;
  };
  const Kernel* kernel(const TileConfig& c, std::string* why);
  std::optional<std::string> check_output(const TileConfig& c);
  void host_problem();  // problem_ and expected_: the host inputs and their fp64 reference
  void setup();

  const Runtime& runtime_;
  std::shared_ptr<Context> ctx_;
  const TuneJob& job_;
  std::map<std::string, Built> kernels_;
  std::vector<DeviceBuffer> buffers_;  // q, k, v, o, lse of each input set in turn, then the spec's tensors
  ref::Problem problem_;               // set 0 on the host: what every config's output is judged by
  ref::Expected expected_;             // the fp64 reference of problem_'s checked rows
  std::vector<ForwardArgs> sets_;
  DeviceBuffer flush_;
  std::unique_ptr<class EventTimer> timer_;
};

}  // namespace flashjit::rt

// NVIDIA's PTX assembler (ptxas) as a child process: where it is, which release it is, and PTX →
// cubin. Self-contained POSIX, so that the CLI (its own copy) and the library run it one way.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace flashjit::ptxas {

// Every executable `ptxas` on PATH, in $CUDA_HOME/bin, then /usr/local/cuda/bin, in that order.
std::vector<std::string> find_all();
// The first of find_all(); "" when none.
std::string find();

// "13.0.88" from `ptxas --version` ("Cuda compilation tools, release 13.0, V13.0.88"), and the
// release as the driver counts versions (1000 · major + 10 · minor: 13000). Empty / 0 when the
// program does not run or does not print that line.
struct Version {
  std::string text;
  int release = 0;
};
Version version(const std::string& path);

struct Result {
  bool ran = false, ok = false;  // ran: the process started; ok: it exited 0 and wrote the cubin
  std::string log;               // its stdout and stderr (with -v: registers and spills per entry)
  std::string cubin;             // when ok and `want_cubin`
  double ms = 0;                 // wall time of the process
};
// `path` -v -arch=`arch` [-O`level`] on `ptx` (through a pipe on its standard input; `level` 0-3,
// passed only when not 3, ptxas' default), the cubin written in a private folder under $TMPDIR
// (else /tmp) that is removed afterwards. No shell: the arguments go to the program as they are.
// Started before its PTX exists, ptxas loads and initialises while the caller generates the PTX (on
// the build machine 27 ms of an empty kernel's 47): finish() hands it over and waits. A Job never
// finished is killed and reaped when it goes.
class Job {
 public:
  Job(const std::string& path, const std::string& arch, bool want_cubin, int level = 3);
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  // Once. Result::ms is the wall time from this call to the program's exit: what the caller waits.
  Result finish(const std::string& ptx);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

Result assemble(const std::string& path, const std::string& ptx, const std::string& arch, bool want_cubin,
                int level = 3);

}  // namespace flashjit::ptxas

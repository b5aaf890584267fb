// Cold compile of new mask specs in one long-lived process, as an application pays it (the goal:
// LLVM → PTX → cubin → loaded in ≤ 300 ms for one config). Each round compiles a spec no earlier
// round used, twice: compile_to_ptx (LLVM only) and Runtime::compile (LLVM, the driver's PTX JIT,
// module load), so the JIT's share is the difference. With a tiered compile (FLASHJIT_TIERED=on,
// the default) Runtime::compile returns with the quick form loaded; the round then also waits for
// the full kernel (Kernel::wait_full) and reports when it had loaded. Run with
// CUDA_CACHE_DISABLE=1 and an empty FLASHJIT_CACHE_DIR, or the driver's and flashjit's caches
// answer instead.
//   flashjit_compile_bench [ROUNDS] [HEAD_DIM]        (defaults 30, 64)
#include <flashjit/flashjit.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace flashjit;

namespace {

double stage_ms(const CompiledKernel& k) {
  double ms = 0;
  for (const StageRecord& s : k.stages) ms += s.ms;
  return ms;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 30;
  const int d = argc > 2 ? std::atoi(argv[2]) : 64;
  try {
    Runtime rt = Runtime::create(0);
    std::vector<double> totals, llvm, fulls;
    for (int i = 0; i < rounds; ++i) {
      AttentionSpec s;
      s.dtype = DType::bf16;
      s.head_dim_qk = s.head_dim_v = d;
      CompileOptions o;
      o.keep_llvm_ir = false;
      o.autotune = "off";  // one config: the heuristic table's
      s.mask = "window(" + std::to_string(1000 + i) + ", 0)";
      const double llvm_only = stage_ms(compile_to_ptx(s, o));
      s.mask = "window(" + std::to_string(2000 + i) + ", 0)";
      const auto t0 = std::chrono::steady_clock::now();
      Kernel k = rt.compile(s, o);
      const double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const double first_llvm = stage_ms(k.compiled());
      const bool quick = k.compiled().description.find("+quick") != std::string::npos;
      k.wait_full();
      const double full = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%2d llvm-only %6.1f ms | Runtime::compile %6.1f ms (LLVM %6.1f)%s | full kernel loaded %6.1f ms%s\n",
                  i, llvm_only, total, first_llvm, quick ? " quick form" : "", full,
                  i == 0 ? "  first of the process" : "");
      if (i > 0) totals.push_back(total), llvm.push_back(first_llvm), fulls.push_back(full);
    }
    if (!totals.empty())
      std::printf(
          "new spec after the first (%zu): Runtime::compile median %.1f ms, p90 %.1f, max %.1f; LLVM median %.1f ms; "
          "full kernel loaded median %.1f ms\n",
          totals.size(), percentile(totals, 0.5), percentile(totals, 0.9), percentile(totals, 1.0),
          percentile(llvm, 0.5), percentile(fulls, 0.5));
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "flashjit_compile_bench: %s\n", e.what());
    return e.kind() == ErrorKind::no_gpu ? 69 : 1;
  }
}

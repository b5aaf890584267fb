// The forward on the GPU against two promises beyond numerics: it writes nothing outside its
// output tensors (NaN-filled guard regions before and after O and LSE and between strided rows
// stay untouched, as cuDNN's tests check), and it is deterministic (O and LSE bitwise equal over
// 100 runs).
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "tests/gpu_case.hpp"
#include "tests/support.hpp"

using namespace flashjit;

namespace {

constexpr size_t kGuardBytes = 4096;  // before and after each tensor

}  // namespace

TEST_CASE("gpu forward: nothing is written outside O and LSE (guard regions and row padding)", "[gpu][forward][guards]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  for (const char* mask : {"none", "causal"}) {
    test::Case c = test::Case::of(test::make_spec(DType::bf16, 96, 64, mask), 200, 333, 2, 4, 2);
    CompileOptions opts;
    opts.autotune = "off";
    Kernel kernel = rt.compile(c.spec, opts);
    std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, 7);
    ForwardArgs a = dp->args;
    // O as [b, s, h, d] with 8 padding elements after every row of d and after every head group.
    const int64_t d_v = 64, row = d_v + 8, seq_stride = c.heads_q * row + 8;
    const size_t o_elems = size_t(c.batch * c.seq_q * seq_stride), lse_elems = size_t(c.batch * c.heads_q * c.seq_q);
    DeviceBuffer o = rt.alloc(kGuardBytes * 2 + o_elems * 2), lse = rt.alloc(kGuardBytes * 2 + lse_elems * 4);
    o.fill_bytes(0xFF);
    lse.fill_bytes(0xFF);
    a.o.data = static_cast<char*>(o.data()) + kGuardBytes;
    a.o.stride[0] = c.seq_q * seq_stride, a.o.stride[1] = seq_stride, a.o.stride[2] = row, a.o.stride[3] = 1;
    a.lse = reinterpret_cast<float*>(static_cast<char*>(lse.data()) + kGuardBytes);
    kernel.forward(a);
    rt.synchronize();
    std::vector<unsigned char> oh(o.size()), lh(lse.size());
    o.download(oh.data(), oh.size());
    lse.download(lh.data(), lh.size());
    INFO("mask " << mask);
    size_t touched_outside = 0, untouched_inside = 0;
    for (size_t i = 0; i < oh.size() / 2; ++i) {
      const bool poisoned = oh[2 * i] == 0xFF && oh[2 * i + 1] == 0xFF;
      const int64_t at = int64_t(i) - int64_t(kGuardBytes / 2);
      const bool inside = at >= 0 && at < int64_t(o_elems) && (at % seq_stride) < c.heads_q * row &&
                          (at % seq_stride) % row < d_v;
      touched_outside += !inside && !poisoned;
      untouched_inside += inside && poisoned;
    }
    CHECK(touched_outside == 0);
    CHECK(untouched_inside == 0);
    for (size_t i = 0; i < kGuardBytes; ++i) {
      CHECK(lh[i] == 0xFF);
      CHECK(lh[lh.size() - 1 - i] == 0xFF);
    }
  }
}

TEST_CASE("gpu forward: O and LSE are bitwise identical over 100 runs", "[gpu][forward][determinism]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  test::Case c = test::Case::of(test::make_spec(DType::bf16, 128, 128, "causal"), 1000, 1000, 2, 8, 2);
  CompileOptions opts;
  opts.autotune = "off";
  Kernel kernel = rt.compile(c.spec, opts);
  std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, 11);
  std::vector<unsigned char> first_o(dp->o.size()), first_lse(dp->lse.size()), o(dp->o.size()), lse(dp->lse.size());
  for (int run = 0; run < 100; ++run) {
    dp->o.fill_bytes(0xFF);
    dp->lse.fill_bytes(0xFF);
    kernel.forward(dp->args);
    rt.synchronize();
    dp->o.download((run == 0 ? first_o : o).data(), o.size());
    dp->lse.download((run == 0 ? first_lse : lse).data(), lse.size());
    if (run == 0) continue;
    INFO("run " << run);
    REQUIRE(std::memcmp(o.data(), first_o.data(), o.size()) == 0);
    REQUIRE(std::memcmp(lse.data(), first_lse.data(), lse.size()) == 0);
  }
}

// The runtime without and with a GPU: typed no-driver errors and launch argument checks.
#include <catch2/catch.hpp>

#include "flashjit/flashjit.hpp"
#include "tests/support.hpp"

using namespace flashjit;

TEST_CASE("runtime: without a driver Runtime::create is a typed no_gpu error naming what is missing", "[runtime]") {
  if (test::gpu_available()) {
    Runtime rt = Runtime::create(0);
    CHECK(rt.device().sm_count > 0);
    CHECK(rt.device().cc_major >= 8);
    CHECK_THROWS_WITH(Runtime::create(4096), Catch::Contains("device 4096 does not exist"));
    return;
  }
  try {
    Runtime::create(0);
    FAIL("Runtime::create succeeded although gpu_available() said no");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::no_gpu);
    CHECK_THAT(e.what(), Catch::Contains("libcuda.so.1") || Catch::Contains("no device") ||
                             Catch::Contains("CUDA driver"));
  }
}

namespace {

struct Fixture {
  Runtime rt = Runtime::create(0);
  Kernel kernel;
  DeviceBuffer q, k, v, o;
  ForwardArgs args;
  Fixture() {
    AttentionSpec s;
    s.dtype = DType::bf16;
    s.head_dim_qk = s.head_dim_v = 64;
    kernel = rt.compile(s);
    const size_t n = 2 * 64 * 4 * 64;
    q = rt.alloc(n * 2 + 64);
    k = rt.alloc(n * 2 + 64);
    v = rt.alloc(n * 2 + 64);
    o = rt.alloc(n * 2 + 64);
    args.batch = 2;
    args.seq_q = args.seq_kv = 64;
    args.heads_q = 4;
    args.heads_kv = 2;
    args.q = bshd(q.data(), 64, 4, 64);
    args.k = bshd(k.data(), 64, 2, 64);
    args.v = bshd(v.data(), 64, 2, 64);
    args.o = bshd(o.data(), 64, 4, 64);
  }
};

void expect_usage_error(const Kernel& kernel, const ForwardArgs& a, const char* words) {
  try {
    kernel.forward(a);
    FAIL("forward accepted bad arguments; expected: " << words);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
    CHECK_THAT(e.what(), Catch::Contains(words));
  }
}

}  // namespace

TEST_CASE("runtime: forward rejects misaligned pointers and bad strides and bad head counts", "[runtime][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  Fixture f;
  f.kernel.forward(f.args);  // the valid call goes through
  f.rt.synchronize();
  ForwardArgs a = f.args;
  a.q.data = static_cast<char*>(f.q.data()) + 2;
  expect_usage_error(f.kernel, a, "q.data is not 16-byte aligned");
  a = f.args;
  a.k.stride[1] = 130;
  expect_usage_error(f.kernel, a, "k.stride[1] (seq) is 130");
  a = f.args;
  a.v.stride[3] = 2;
  expect_usage_error(f.kernel, a, "v.stride[3] (head dim) is 2");
  a = f.args;
  a.heads_kv = 3;
  expect_usage_error(f.kernel, a, "must be a multiple of heads_kv");
  a = f.args;
  a.o.data = nullptr;
  expect_usage_error(f.kernel, a, "o.data is null");
}

TEST_CASE("runtime: device info and kernel resources are reported", "[runtime][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  Fixture f;
  const DeviceInfo& d = f.rt.device();
  INFO(d.name << " sm_" << d.cc_major << d.cc_minor << " " << d.sm_count << " SMs driver " << d.driver_version);
  CHECK(!d.name.empty());
  CHECK(d.shared_per_block_optin >= d.shared_per_block);
  CHECK(d.driver_version >= 12000);
  CHECK(f.kernel.registers() > 0);
  CHECK(f.kernel.registers() <= 255);
  CHECK(f.kernel.spill_bytes() == 0);
}

// Launch-time size products (runtime/launch.cpp): every product of caller-given sizes and strides
// is checked for int64 overflow and refused as Error(usage) naming the tensor, since a wrapped size
// passes later checks and sizes allocations the kernels then overrun. No GPU: only the checks run.
#include <catch2/catch.hpp>

#include <cstdint>

#include "compiler/analyzed_spec.hpp"
#include "runtime/launch.hpp"
#include "tests/internal/launch_args.hpp"

using namespace flashjit;

using test::aliasing_tensor;
using test::expect_launch_usage;
using test::launch_memory;

TEST_CASE("launch sizes: a spec tensor whose dims multiply past int64 is refused naming it", "[launch][sizes]") {
  AttentionSpec s;
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = 64;
  s.tensors = {{"t", ScalarType::f32, {"heads_q", "seq_q", "seq_kv"}}};
  s.mask = "t[h, q, kv] > 0.0";
  ForwardArgs a;
  a.batch = 1, a.heads_q = a.heads_kv = 65535, a.seq_q = a.seq_kv = INT32_MAX;
  a.q = a.k = a.v = a.o = aliasing_tensor();
  a.buffers = {{"t", launch_memory(), 1}};
  expect_launch_usage(s, a, "tensor 't': its element count overflows int64");
}

TEST_CASE("launch sizes: q/k/v/o spans (sizes times strides) past int64 are refused naming the tensor", "[launch][sizes]") {
  AttentionSpec s;
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = 64;
  ForwardArgs a;
  a.batch = 2, a.heads_q = a.heads_kv = 1, a.seq_q = a.seq_kv = 128;
  a.q = a.k = a.v = a.o = aliasing_tensor();
  a.v.stride[0] = INT64_MAX / 2 / 8 * 8;  // a product that fits, plus one that fits: the sum wraps
  a.v.stride[1] = INT64_MAX / 127 / 8 * 8;
  expect_launch_usage(s, a, "v's extent (sizes times strides) overflows int64");
  a.v = aliasing_tensor();
  a.o.stride[1] = INT64_MAX / 64 / 8 * 8;  // 127 rows of it wrap
  expect_launch_usage(s, a, "o's extent (sizes times strides) overflows int64");
}

TEST_CASE("launch sizes: checked_product", "[launch][sizes]") {
  CHECK(rt::checked_product({65535, 65535, INT32_MAX}, "x") == int64_t(65535) * 65535 * INT32_MAX);
  CHECK_THROWS_WITH(rt::checked_product({65535, 65535, INT32_MAX, 4}, "the block map size"),
                    Catch::Contains("the block map size overflows int64"));
}

// Split-KV's host side: the automatic split count (runtime/split_kv.cpp, FlashAttention-2's rule)
// and the check of ForwardArgs::num_splits. The kernels are tested on the GPU
// (tests/test_gpu_split_kv.cpp).
#include <catch2/catch.hpp>

#include "compiler/analyzed_spec.hpp"
#include "runtime/launch.hpp"
#include "runtime/split_kv.hpp"
#include "tests/internal/launch_args.hpp"

using namespace flashjit;
using rt::auto_splits;

TEST_CASE("split-KV: a launch that fills the GPU is never split", "[split]") {
  // 64 sequences × 32 heads × 1 query tile = 2048 CTAs on 132 SMs.
  CHECK(auto_splits({2048, 256, 132, 1}) == 1);
  // 80% of the CTA slots is enough: 106 of 132.
  CHECK(auto_splits({106, 256, 132, 1}) == 1);
  CHECK(auto_splits({105, 256, 132, 1}) > 1);
  // With two CTAs per SM the slots double: 132 CTAs fill only half of 264.
  CHECK(auto_splits({132, 256, 132, 2}) > 1);
}

TEST_CASE("split-KV: decode splits to fill the SMs, bounded by the key tiles and 128", "[split]") {
  // One sequence, 32 heads: 32 CTAs; 4 splits make 128 of 132 slots (97%).
  CHECK(auto_splits({32, 256, 132, 1}) == 4);
  // 8 heads: 14 splits make 112 CTAs (85% of the slots), the fewest within 85% of the best
  // candidate's 97% (16 splits: 128 CTAs).
  CHECK(auto_splits({8, 256, 132, 1}) == 14);
  // One CTA: as many splits as fill the slots well, never more than 128.
  const int one = auto_splits({1, 100000, 132, 1});
  CHECK(one > 64);
  CHECK(one <= 128);
  // Never more splits than key tiles: each split walks at least one.
  CHECK(auto_splits({1, 3, 132, 1}) <= 3);
  CHECK(auto_splits({1, 1, 132, 1}) == 1);
  CHECK(auto_splits({4, 0, 132, 1}) == 1);
  // Unknown occupancy counts as one CTA per SM.
  CHECK(auto_splits({32, 256, 132, 0}) == auto_splits({32, 256, 132, 1}));
}

TEST_CASE("split-KV: every automatic count is in range and shortens the longest split", "[split]") {
  for (int64_t ctas : {1, 2, 3, 7, 16, 33, 64, 100})
    for (int64_t tiles : {1, 2, 5, 17, 64, 255, 4096})
      for (int occupancy : {1, 2, 3}) {
        const int s = auto_splits({ctas, tiles, 132, occupancy});
        INFO("ctas " << ctas << " tiles " << tiles << " occupancy " << occupancy << " → " << s);
        CHECK(s >= 1);
        CHECK(s <= 128);
        CHECK(s <= std::max<int64_t>(tiles, 1));
        if (s > 1) CHECK((tiles + s - 1) / s != (tiles + s - 2) / (s - 1));
      }
}

TEST_CASE("split-KV: num_splits outside 0..128 is a usage error naming it", "[split]") {
  AttentionSpec s;
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = 64;
  ForwardArgs a;
  a.batch = 1, a.heads_q = a.heads_kv = 1, a.seq_q = 1, a.seq_kv = 128;
  a.q = a.k = a.v = a.o = test::aliasing_tensor();
  for (int bad : {-1, 129, 1000}) {
    a.num_splits = bad;
    rt::ForwardLaunch launch;
    try {
      rt::pack_forward(*analyze_spec(s), a, launch);
      FAIL("num_splits " << bad << " was accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::usage);
      CHECK_THAT(e.what(), Catch::Contains("num_splits is " + std::to_string(bad)) && Catch::Contains("2..128"));
    }
  }
  for (int good : {0, 1, 2, 128}) {
    a.num_splits = good;
    rt::ForwardLaunch launch;
    CHECK_NOTHROW(rt::pack_forward(*analyze_spec(s), a, launch));
    CHECK(launch.fixed.num_splits == 1);  // Kernel::forward sets the split it launches
  }
}

// Varlen's host side: ForwardArgs::cu_seqlens_* misuse is a usage error naming the field (what
// can be checked without reading the device-side offsets), specs it cannot serve are refused by
// name, and the planner keys varlen kernels apart. Numerics: tests/test_gpu_varlen.cpp.
#include <catch2/catch.hpp>

#include "compiler/pipeline.hpp"
#include "runtime/launch.hpp"
#include "tests/internal/launch_args.hpp"

using namespace flashjit;
using test::aliasing_tensor;
using test::expect_launch_usage;
using test::launch_memory;

namespace {

AttentionSpec spec_of(const std::string& mask = "causal") {
  AttentionSpec s;
  s.dtype = DType::bf16;
  s.head_dim_qk = s.head_dim_v = 64;
  s.mask = mask;
  return s;
}

ForwardArgs varlen_args() {
  ForwardArgs a;
  a.batch = 3, a.heads_q = a.heads_kv = 2, a.seq_q = 100, a.seq_kv = 120;
  a.q = a.k = a.v = a.o = aliasing_tensor();
  a.cu_seqlens_q = reinterpret_cast<const int32_t*>(launch_memory());
  a.cu_seqlens_kv = reinterpret_cast<const int32_t*>(launch_memory() + 16);
  a.max_seqlen_q = 60, a.max_seqlen_kv = 70;
  return a;
}

}  // namespace

TEST_CASE("varlen: well-formed packed arguments are packed into the kernel's parameters", "[varlen]") {
  rt::ForwardLaunch launch;
  const ForwardArgs a = varlen_args();
  REQUIRE_NOTHROW(rt::pack_forward(*analyze_spec(spec_of()), a, launch));
  CHECK(launch.fixed.cu_seqlens_q == a.cu_seqlens_q);
  CHECK(launch.fixed.cu_seqlens_kv == a.cu_seqlens_kv);
  CHECK(launch.fixed.seq_q == 100);  // the packed totals
}

TEST_CASE("varlen: misuse names the field and what is allowed", "[varlen]") {
  ForwardArgs a = varlen_args();
  a.cu_seqlens_kv = nullptr;
  expect_launch_usage(spec_of(), a, "cu_seqlens_kv is null");
  a = varlen_args();
  a.cu_seqlens_q = nullptr;
  expect_launch_usage(spec_of(), a, "cu_seqlens_q is null");
  a = varlen_args();
  a.cu_seqlens_q = reinterpret_cast<const int32_t*>(launch_memory() + 2);
  expect_launch_usage(spec_of(), a, "4-byte aligned");
  a = varlen_args();
  a.max_seqlen_q = 101;
  expect_launch_usage(spec_of(), a, "max_seqlen_q is 101; with varlen it must be in [0, seq_q = 100]");
  a = varlen_args();
  a.max_seqlen_kv = -1;
  expect_launch_usage(spec_of(), a, "max_seqlen_kv is -1");
}

TEST_CASE("varlen with a paged cache: packed queries, keys through the block table", "[varlen][paged]") {
  ForwardArgs a = varlen_args();
  a.block_table = reinterpret_cast<const int32_t*>(launch_memory() + 64);
  a.page_size = 16, a.max_pages_per_seq = 8;  // seq_kv 120: the most keys a sequence has
  rt::ForwardLaunch launch;
  REQUIRE_NOTHROW(rt::pack_forward(*analyze_spec(spec_of()), a, launch));
  CHECK(launch.fixed.cu_seqlens_kv == a.cu_seqlens_kv);
  CHECK(launch.fixed.block_table == a.block_table);
  a.max_seqlen_kv = 121;
  expect_launch_usage(spec_of(), a, "max_seqlen_kv is 121; with varlen it must be in [0, seq_kv = 120] (seq_kv is the "
                                    "most keys a sequence's pages hold)");
  a = varlen_args();
  a.block_table = reinterpret_cast<const int32_t*>(launch_memory() + 64);
  a.page_size = 16, a.max_pages_per_seq = 7;  // 112 keys < seq_kv
  expect_launch_usage(spec_of(), a, "seq_kv 120 exceeds max_pages_per_seq * page_size = 112");
  KernelRequest r;
  r.target.arch = "sm_90a";
  r.target.varlen = r.target.paged = true;
  r.target.page_size = 16;
  CHECK_THAT(plan_kernel(analyze_spec(spec_of()), r).plan->describe(), Catch::Contains("+varlen +paged16"));
}

TEST_CASE("varlen: specs it cannot serve are refused, naming why", "[varlen]") {
  AttentionSpec doc = spec_of("causal && document(doc)");
  doc.tensors = {{"doc", ScalarType::i32, {"batch", "seq_kv"}}};
  expect_launch_usage(doc, varlen_args(), "tensor 'doc' has a seq_q or seq_kv extent");
  AttentionSpec read = spec_of("t[h] > 0.0 && kv <= q");
  read.tensors = {{"t", ScalarType::f32, {"heads_q"}}};
  ForwardArgs a = varlen_args();
  a.buffers = {{"t", launch_memory(), 2}};
  expect_launch_usage(read, a, "block map");
  // The same spec unpacked (no cu_seqlens) is fine.
  a.cu_seqlens_q = a.cu_seqlens_kv = nullptr;
  rt::ForwardLaunch launch;
  CHECK_NOTHROW(rt::pack_forward(*analyze_spec(read), a, launch));
}

TEST_CASE("varlen: the planner refuses what varlen cannot serve and keys varlen kernels apart", "[varlen]") {
  KernelRequest r;
  r.target.arch = "sm_90a";
  const PlannedKernel plain = plan_kernel(analyze_spec(spec_of()), r);
  r.target.varlen = true;
  const PlannedKernel varlen = plan_kernel(analyze_spec(spec_of()), r);
  CHECK(plain.key.hash != varlen.key.hash);
  CHECK_THAT(varlen.plan->describe(), Catch::Contains("+varlen"));
  AttentionSpec doc = spec_of("causal && document(doc)");
  doc.tensors = {{"doc", ScalarType::i32, {"batch", "seq_kv"}}};
  CHECK_THROWS_WITH(plan_kernel(analyze_spec(doc), r), Catch::Contains("varlen is not possible"));
}

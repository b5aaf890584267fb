// The C ABI (include/flashjit/flashjit.h): status codes and messages without a GPU, and on a GPU
// a forward through the C ABI that matches the C++ API bit for bit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "flashjit/flashjit.h"
#include "tests/capi_helpers.hpp"
#include "tests/gpu_case.hpp"
#include "tests/support.hpp"

namespace {

const char* kSpecD64 = "name: capi\ndtype: bf16\nhead_dim: 64\nmask: causal\n";
// Line 3, column 11 holds an unknown identifier inside the mask expression.
const char* kBadSpec = "dtype: bf16\nhead_dim: 64\nmask: \"q >= kvv\"\n";

std::string last_error() { return fj_last_error(); }

fj_forward_args empty_args() {
  fj_forward_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  return a;
}

}  // namespace

TEST_CASE("capi: version, status names and fj_free(NULL)", "[capi]") {
  CHECK(std::string(fj_version()) == flashjit::versions().flashjit);
  CHECK(std::string(fj_status_name(FJ_OK)) == "FJ_OK");
  CHECK(std::string(fj_status_name(FJ_ERR_SPEC)) == "FJ_ERR_SPEC");
  CHECK(std::string(fj_status_name(FJ_ERR_USAGE)) == "FJ_ERR_USAGE");
  CHECK(std::string(fj_status_name(FJ_ERR_NO_GPU)) == "FJ_ERR_NO_GPU");
  CHECK(std::string(fj_status_name(FJ_ERR_OUT_OF_MEMORY)) == "FJ_ERR_OUT_OF_MEMORY");
  CHECK(FJ_ERR_OUT_OF_MEMORY == 5);  // Python's flashjit/_capi.py has the same number
  CHECK(std::string(fj_status_name(static_cast<fj_status>(12345))) == "FJ_UNKNOWN_STATUS");
  CHECK(FJ_OK == 0);
  CHECK(FJ_ERR_NO_GPU == 69);
  CHECK(FJ_ERR_INTERNAL == 70);
  fj_free(nullptr);
  fj_runtime_destroy(nullptr);
  fj_kernel_destroy(nullptr);
}

TEST_CASE("capi: NULL arguments are FJ_ERR_USAGE naming the argument", "[capi]") {
  CHECK(fj_runtime_create(0, nullptr) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("fj_runtime_create") && Catch::Contains("out is NULL"));

  fj_kernel* kernel = reinterpret_cast<fj_kernel*>(0x1);  // must be overwritten with NULL
  CHECK(fj_compile(nullptr, kSpecD64, &kernel) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("runtime is NULL"));
  CHECK(kernel == nullptr);

  char* ptx = reinterpret_cast<char*>(0x1);
  CHECK(fj_compile_ptx(nullptr, "sm_90a", &ptx, nullptr) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("fj_compile_ptx") && Catch::Contains("spec_yaml is NULL"));
  CHECK(ptx == nullptr);
  CHECK(fj_compile_ptx(kSpecD64, "sm_90a", nullptr, nullptr) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("ptx_out is NULL"));

  CHECK(fj_kernel_wait_full(nullptr) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("fj_kernel_wait_full") && Catch::Contains("kernel is NULL"));

  CHECK(fj_forward(nullptr, nullptr) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("fj_forward") && Catch::Contains("args is NULL"));
  fj_forward_args a = empty_args();
  CHECK(fj_forward(nullptr, &a) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("kernel is NULL"));

  fj_block_map* map = reinterpret_cast<fj_block_map*>(0x1);  // must be overwritten with NULL
  CHECK(fj_block_map_build(nullptr, nullptr, &map) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("fj_block_map_build") && Catch::Contains("args is NULL"));
  CHECK(map == nullptr);
  CHECK(fj_block_map_build(nullptr, &a, &map) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("kernel is NULL"));
  fj_block_map_destroy(nullptr);  // like free(NULL)

  fj_kernel_info info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  CHECK(fj_kernel_get_info(nullptr, &info) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("kernel is NULL"));
  CHECK(fj_kernel_get_info(nullptr, nullptr) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("out is NULL"));
}

TEST_CASE("capi: struct_size too small or with unknown trailing fields is FJ_ERR_USAGE", "[capi]") {
  fj_forward_args a = empty_args();
  a.struct_size = offsetof(fj_forward_args, stream);  // an impossible, older-than-v1 size
  CHECK(fj_forward(nullptr, &a) == FJ_ERR_USAGE);
  // The smallest struct_size accepted is the first published layout's (ending at `stream`).
  CHECK_THAT(last_error(), Catch::Contains("args->struct_size is " + std::to_string(a.struct_size)) &&
                               Catch::Contains(std::to_string(offsetof(fj_forward_args, stream) + sizeof(void*))));
  a.struct_size = 0;
  CHECK(fj_forward(nullptr, &a) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("struct_size is 0"));

  // A newer caller's larger struct: zero extra bytes are accepted (the next check is the kernel),
  // a set extra byte asks for a feature this library lacks and is refused.
  struct Newer {
    fj_forward_args v1;
    int64_t future_field;
  } newer;
  std::memset(&newer, 0, sizeof newer);
  newer.v1.struct_size = sizeof newer;
  CHECK(fj_forward(nullptr, &newer.v1) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("kernel is NULL"));
  newer.future_field = 7;
  CHECK(fj_forward(nullptr, &newer.v1) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("does not have") && Catch::Contains(std::to_string(sizeof(fj_forward_args))));

  // A caller compiled against the first published layout (no block_map): accepted, and the bytes
  // past its struct_size are never read (the next check is the kernel).
  fj_forward_args v1 = empty_args();
  v1.struct_size = offsetof(fj_forward_args, block_map);
  v1.block_map = reinterpret_cast<const fj_block_map*>(0x1);
  CHECK(fj_forward(nullptr, &v1) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("kernel is NULL"));

  fj_kernel_info info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = sizeof(size_t);
  CHECK(fj_kernel_get_info(nullptr, &info) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("out->struct_size is " + std::to_string(sizeof(size_t))));
}

TEST_CASE("capi: a bad spec is FJ_ERR_SPEC with line:col", "[capi]") {
  char* ptx = nullptr;
  CHECK(fj_compile_ptx(kBadSpec, nullptr, &ptx, nullptr) == FJ_ERR_SPEC);
  CHECK(ptx == nullptr);
  CHECK_THAT(last_error(), Catch::Contains(":3:") && Catch::Contains("kvv"));
  CHECK(fj_compile_ptx("dtype: [unclosed\n", nullptr, &ptx, nullptr) == FJ_ERR_SPEC);
  CHECK_FALSE(last_error().empty());
  CHECK(fj_compile_ptx("dtype: bf16\nhead_dim: 63\n", nullptr, &ptx, nullptr) == FJ_ERR_SPEC);
  CHECK_THAT(last_error(), Catch::Contains(":2:") && Catch::Contains("63"));
}

TEST_CASE("capi: fj_compile_ptx needs no GPU and returns PTX with the entry point", "[capi]") {
  char* ptx = nullptr;
  char* entry = nullptr;
  REQUIRE(fj_compile_ptx(kSpecD64, nullptr, &ptx, &entry) == FJ_OK);
  CHECK(last_error().empty());
  REQUIRE(ptx != nullptr);
  REQUIRE(entry != nullptr);
  const std::string text = ptx;
  CHECK_THAT(text, Catch::Contains(".entry") && Catch::Contains(entry) && Catch::Contains("sm_90a"));
  CHECK(std::string(entry).find("flashjit_fwd_") == 0);
  fj_free(ptx);
  fj_free(entry);

  REQUIRE(fj_compile_ptx(kSpecD64, "sm_80", &ptx, nullptr) == FJ_OK);
  CHECK_THAT(std::string(ptx), Catch::Contains(".target sm_80"));
  fj_free(ptx);

  CHECK(fj_compile_ptx(kSpecD64, "sm_12", &ptx, nullptr) != FJ_OK);
  CHECK(ptx == nullptr);
  CHECK_THAT(last_error(), Catch::Contains("sm_12"));
}

TEST_CASE("capi: fj_runtime_create is FJ_ERR_NO_GPU without a driver, FJ_OK with one", "[capi]") {
  fj_runtime* rt = reinterpret_cast<fj_runtime*>(0x1);
  fj_status s = fj_runtime_create(0, &rt);
  if (flashjit::test::gpu_available()) {
    CHECK(s == FJ_OK);
    CHECK(last_error().empty());
    CHECK(rt != nullptr);
    fj_runtime_destroy(rt);
    CHECK(fj_runtime_create(4096, &rt) != FJ_OK);
    CHECK(rt == nullptr);
    CHECK_THAT(last_error(), Catch::Contains("4096"));
  } else {
    CHECK(s == FJ_ERR_NO_GPU);
    CHECK(rt == nullptr);
    CHECK_THAT(last_error(), Catch::Contains("libcuda.so.1") || Catch::Contains("no device") ||
                                 Catch::Contains("CUDA driver"));
  }
}

TEST_CASE("capi: the last error is per thread", "[capi]") {
  char* ptx = nullptr;
  REQUIRE(fj_compile_ptx(kBadSpec, nullptr, &ptx, nullptr) == FJ_ERR_SPEC);
  const std::string mine = last_error();
  REQUIRE_THAT(mine, Catch::Contains("kvv"));

  std::string theirs_before, theirs_after;
  fj_status theirs_status = FJ_OK;
  std::thread t([&] {
    theirs_before = fj_last_error();  // a fresh thread has no error
    theirs_status = fj_runtime_create(0, nullptr);
    theirs_after = fj_last_error();
  });
  t.join();
  CHECK(theirs_before.empty());
  CHECK(theirs_status == FJ_ERR_USAGE);
  CHECK_THAT(theirs_after, Catch::Contains("out is NULL"));
  CHECK(last_error() == mine);  // the other thread's failure did not touch this thread's message

  // A successful call clears this thread's message.
  REQUIRE(fj_compile_ptx(kSpecD64, nullptr, &ptx, nullptr) == FJ_OK);
  fj_free(ptx);
  CHECK(last_error().empty());
}

// ---- GPU ---------------------------------------------------------------------------------------

using flashjit::test::CapiGpu;
using flashjit::test::random_bf16;
using flashjit::test::to_c;

TEST_CASE("capi: forward through the C ABI matches the C++ API bit for bit", "[capi][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  using namespace flashjit;
  CapiGpu c;
  fj_status st = fj_runtime_create(0, &c.crt);
  INFO(last_error());
  REQUIRE(st == FJ_OK);
  st = fj_compile(c.crt, kSpecD64, &c.ckernel);
  INFO(last_error());
  REQUIRE(st == FJ_OK);

  Runtime rt = Runtime::create(0);
  Kernel kernel = rt.compile(AttentionSpec::from_yaml(kSpecD64));

  fj_kernel_info info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  REQUIRE(fj_kernel_get_info(c.ckernel, &info) == FJ_OK);
  CHECK(std::string(info.key) == kernel.compiled().key);
  CHECK(std::string(info.description) == kernel.compiled().description);
  CHECK(info.block_m == kernel.compiled().config.block_m);
  CHECK(info.num_warps == kernel.compiled().config.num_warps);
  CHECK(info.registers == kernel.registers());
  CHECK(info.spill_bytes == kernel.spill_bytes());
  CHECK(info.head_dim_qk == 64);
  CHECK_THAT(std::string(info.ptx), Catch::Contains(".entry"));
  CHECK_THAT(std::string(info.spec), Catch::Contains("causal"));

  const int64_t B = 2, S = 203, HQ = 4, HKV = 2, D = 64;
  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  auto hq = random_bf16(B * S * HQ * D, seed), hk = random_bf16(B * S * HKV * D, seed + 1),
       hv = random_bf16(B * S * HKV * D, seed + 2);
  DeviceBuffer q = rt.alloc(hq.size() * 2), k = rt.alloc(hk.size() * 2), v = rt.alloc(hv.size() * 2);
  q.upload(hq.data(), hq.size() * 2);
  k.upload(hk.data(), hk.size() * 2);
  v.upload(hv.data(), hv.size() * 2);
  const size_t o_bytes = B * S * HQ * D * 2, lse_bytes = B * HQ * S * 4;
  DeviceBuffer o1 = rt.alloc(o_bytes), o2 = rt.alloc(o_bytes), l1 = rt.alloc(lse_bytes), l2 = rt.alloc(lse_bytes);
  for (DeviceBuffer* b : {&o1, &o2, &l1, &l2}) b->fill_bytes(0xFF);

  // K is BHSD memory to exercise strides; the others are BSHD.
  ForwardArgs f;
  f.batch = B;
  f.seq_q = f.seq_kv = S;
  f.heads_q = HQ;
  f.heads_kv = HKV;
  f.q = bshd(q.data(), S, HQ, D);
  f.k = test::bhsd(k.data(), S, HKV, D);
  f.v = bshd(v.data(), S, HKV, D);
  f.o = bshd(o1.data(), S, HQ, D);
  f.lse = static_cast<float*>(l1.data());
  f.scale = 0.1f;
  kernel.forward(f);

  fj_forward_args a = empty_args();
  a.batch = B;
  a.seq_q = a.seq_kv = S;
  a.heads_q = HQ;
  a.heads_kv = HKV;
  a.q = to_c(f.q);
  a.k = to_c(f.k);
  a.v = to_c(f.v);
  a.o = to_c(bshd(o2.data(), S, HQ, D));
  a.lse = static_cast<float*>(l2.data());
  a.scale = 0.1f;
  REQUIRE(fj_forward(c.ckernel, &a) == FJ_OK);
  CHECK(last_error().empty());
  rt.synchronize();

  std::vector<uint16_t> out1(o_bytes / 2), out2(o_bytes / 2);
  std::vector<float> lse1(lse_bytes / 4), lse2(lse_bytes / 4);
  o1.download(out1.data(), o_bytes);
  o2.download(out2.data(), o_bytes);
  l1.download(lse1.data(), lse_bytes);
  l2.download(lse2.data(), lse_bytes);
  CHECK(std::memcmp(out1.data(), out2.data(), o_bytes) == 0);
  CHECK(std::memcmp(lse1.data(), lse2.data(), lse_bytes) == 0);

  // A caller of the first published layout: its struct ends before block_map, so whatever lies
  // past struct_size is not read (here a junk pointer that would be refused as a map).
  fj_forward_args v1 = a;
  v1.struct_size = offsetof(fj_forward_args, block_map);
  v1.block_map = reinterpret_cast<const fj_block_map*>(0x1);
  o2.fill_bytes(0xFF);
  REQUIRE(fj_forward(c.ckernel, &v1) == FJ_OK);
  rt.synchronize();
  std::vector<uint16_t> out3(o_bytes / 2);
  o2.download(out3.data(), o_bytes);
  CHECK(std::memcmp(out1.data(), out3.data(), o_bytes) == 0);
  // The comparison is not vacuous: the kernel wrote every output (the 0xFF poison is NaN).
  size_t poisoned = 0;
  for (uint16_t x : out2) poisoned += x == 0xFFFF;
  CHECK(poisoned == 0);
  size_t nonzero = 0;
  for (uint16_t x : out2) nonzero += (x & 0x7FFF) != 0;
  CHECK(nonzero > out2.size() / 2);
}

TEST_CASE("capi: a block map built once is reused and gives the same output as a per-call rebuild", "[capi][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  using namespace flashjit;
  CapiGpu c;
  REQUIRE(fj_runtime_create(0, &c.crt) == FJ_OK);
  const char* spec = "dtype: bf16\nhead_dim: 64\nmask: \"causal && document(doc)\"\ntensors:\n  doc: {type: i32, dims: [seq_kv]}\n";
  fj_status st = fj_compile(c.crt, spec, &c.ckernel);
  INFO(last_error());
  REQUIRE(st == FJ_OK);
  Runtime rt = Runtime::create(0);
  const int64_t B = 2, S = 777, H = 2, D = 64;
  auto hx = random_bf16(B * S * H * D, 11);
  std::vector<int32_t> doc(S);
  for (int64_t i = 0; i < S; ++i) doc[i] = int32_t(i / 100 + (i % 7 == 0));  // ragged documents
  std::sort(doc.begin(), doc.end());
  DeviceBuffer x = rt.alloc(hx.size() * 2), o1 = rt.alloc(hx.size() * 2), o2 = rt.alloc(hx.size() * 2),
               d = rt.alloc(S * 4);
  x.upload(hx.data(), hx.size() * 2);
  d.upload(doc.data(), S * 4);
  fj_buffer buf{"doc", d.data(), S};
  fj_forward_args a = empty_args();
  a.batch = B;
  a.seq_q = a.seq_kv = S;
  a.heads_q = a.heads_kv = H;
  a.q = a.k = a.v = to_c(bshd(x.data(), S, H, D));
  a.o = to_c(bshd(o1.data(), S, H, D));
  a.buffers = &buf;
  a.num_buffers = 1;
  REQUIRE(fj_forward(c.ckernel, &a) == FJ_OK);  // no map: rebuilt on the stream
  fj_block_map* map = nullptr;
  st = fj_block_map_build(c.ckernel, &a, &map);
  INFO(last_error());
  REQUIRE(st == FJ_OK);
  REQUIRE(map != nullptr);
  fj_forward_args b = a;
  b.o = to_c(bshd(o2.data(), S, H, D));
  b.block_map = map;
  REQUIRE(fj_forward(c.ckernel, &b) == FJ_OK);
  REQUIRE(fj_forward(c.ckernel, &b) == FJ_OK);  // reused
  rt.synchronize();
  std::vector<uint16_t> r1(hx.size()), r2(hx.size());
  o1.download(r1.data(), r1.size() * 2);
  o2.download(r2.data(), r2.size() * 2);
  CHECK(r1 == r2);
  fj_block_map* again = nullptr;
  CHECK(fj_block_map_build(c.ckernel, &b, &again) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("args->block_map must be NULL"));
  fj_forward_args other = b;
  other.seq_q = 700;
  CHECK(fj_forward(c.ckernel, &other) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("block_map was built for another kernel, sizes or params"));
  fj_block_map_destroy(map);
  fj_kernel* exact = nullptr;
  REQUIRE(fj_compile(c.crt, kSpecD64, &exact) == FJ_OK);
  fj_forward_args e = a;
  e.buffers = nullptr;
  e.num_buffers = 0;
  CHECK(fj_block_map_build(exact, &e, &again) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("exact closed form"));
  CHECK(again == nullptr);
  fj_kernel_destroy(exact);
}

TEST_CASE("capi: forward argument errors are FJ_ERR_USAGE naming the argument", "[capi][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  using namespace flashjit;
  CapiGpu c;
  REQUIRE(fj_runtime_create(0, &c.crt) == FJ_OK);

  fj_kernel* bad = reinterpret_cast<fj_kernel*>(0x1);
  CHECK(fj_compile(c.crt, kBadSpec, &bad) == FJ_ERR_SPEC);
  CHECK(bad == nullptr);
  CHECK_THAT(last_error(), Catch::Contains(":3:") && Catch::Contains("kvv"));
  CHECK(fj_compile(c.crt, nullptr, &bad) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("spec_yaml is NULL"));
  CHECK(fj_compile(c.crt, kSpecD64, nullptr) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("out is NULL"));

  REQUIRE(fj_compile(c.crt, kSpecD64, &c.ckernel) == FJ_OK);
  Runtime rt = Runtime::create(0);
  const int64_t S = 64, H = 2, D = 64, bytes = S * H * D * 2 + 64;
  DeviceBuffer q = rt.alloc(bytes), k = rt.alloc(bytes), v = rt.alloc(bytes), o = rt.alloc(bytes);
  fj_forward_args good = empty_args();
  good.batch = 1;
  good.seq_q = good.seq_kv = S;
  good.heads_q = good.heads_kv = H;
  good.q = to_c(bshd(q.data(), S, H, D));
  good.k = to_c(bshd(k.data(), S, H, D));
  good.v = to_c(bshd(v.data(), S, H, D));
  good.o = to_c(bshd(o.data(), S, H, D));
  REQUIRE(fj_forward(c.ckernel, &good) == FJ_OK);
  rt.synchronize();

  auto expect = [&](const fj_forward_args& a, const char* words) {
    CHECK(fj_forward(c.ckernel, &a) == FJ_ERR_USAGE);
    CHECK_THAT(last_error(), Catch::Contains(words));
  };
  fj_forward_args a = good;
  a.q.data = static_cast<char*>(q.data()) + 2;
  expect(a, "q.data is not 16-byte aligned");
  a = good;
  a.k.stride[1] = 130;
  expect(a, "k.stride[1] (seq) is 130");
  a = good;
  a.v.stride[3] = 2;
  expect(a, "v.stride[3]");
  a = good;
  a.o.data = nullptr;
  expect(a, "o.data is null");
  a = good;
  a.num_params = 1;
  expect(a, "args->params is NULL");
  a = good;
  fj_param p{nullptr, 1.0};
  a.params = &p;
  a.num_params = 1;
  expect(a, "args->params[0].name is NULL");
  a = good;
  fj_param unknown{"nope", 1.0};
  a.params = &unknown;
  a.num_params = 1;
  expect(a, "param 'nope' is not declared");  // checked by Kernel::forward, mapped to FJ_ERR_USAGE
  a = good;
  a.num_buffers = -1;
  expect(a, "args->num_buffers is -1");
  a = good;
  fj_buffer nameless{nullptr, q.data(), 4};
  a.buffers = &nameless;
  a.num_buffers = 1;
  expect(a, "args->buffers[0].name is NULL");
  a = good;
  a.struct_size = 8;
  expect(a, "args->struct_size is 8");
  CHECK(fj_forward(c.ckernel, nullptr) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("args is NULL"));
}

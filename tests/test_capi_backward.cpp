// fj_backward (include/flashjit/flashjit.h): its argument and struct_size errors without a GPU,
// and on a GPU gradients through the C ABI that match Kernel::backward bit for bit.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "flashjit/flashjit.h"
#include "tests/capi_helpers.hpp"
#include "tests/gpu_case.hpp"
#include "tests/support.hpp"

namespace {

const char* kSpec = "name: capi_bwd\ndtype: bf16\nhead_dim: 64\nmask: causal\n";

std::string last_error() { return fj_last_error(); }

// Never dereferenced: the calls below fail before anything reads it.
const float* const kSomeLse = reinterpret_cast<const float*>(0x100);

fj_backward_args empty_args() {
  fj_backward_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = sizeof a;
  return a;
}

}  // namespace

TEST_CASE("capi: fj_backward NULL arguments are FJ_ERR_USAGE naming the argument", "[capi]") {
  CHECK(fj_backward(nullptr, nullptr) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("fj_backward") && Catch::Contains("args is NULL"));

  fj_backward_args a = empty_args();
  CHECK(fj_backward(nullptr, &a) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("fj_backward: args->lse is NULL") && Catch::Contains("required"));

  a.lse = kSomeLse;
  CHECK(fj_backward(nullptr, &a) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("fj_backward: kernel is NULL"));

  fj_block_map* map = reinterpret_cast<fj_block_map*>(0x1);
  CHECK(fj_backward_block_map_build(nullptr, nullptr, &map) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("fj_backward_block_map_build") && Catch::Contains("args is NULL"));
  CHECK(map == nullptr);  // cleared before anything can fail
  CHECK(fj_backward_block_map_build(nullptr, &a, &map) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("fj_backward_block_map_build: kernel is NULL"));
  a.block_map = reinterpret_cast<const fj_block_map*>(0x1);  // never dereferenced: refused first
  const fj_kernel* some_kernel = reinterpret_cast<const fj_kernel*>(0x1);
  CHECK(fj_backward_block_map_build(some_kernel, &a, nullptr) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("out is NULL"));
  CHECK(fj_backward_block_map_build(some_kernel, &a, &map) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("args->block_map must be NULL"));
  a.block_map = nullptr;
  a.lse = nullptr;
  CHECK(fj_backward_block_map_build(some_kernel, &a, &map) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("args->lse is NULL"));
}

TEST_CASE("capi: fj_backward_args struct_size too small or with unknown trailing fields is FJ_ERR_USAGE",
          "[capi]") {
  // The first published layout ends at `deterministic`; sizeof may add tail padding past it.
  const size_t v1 = offsetof(fj_backward_args, deterministic) + sizeof(int);
  fj_backward_args a = empty_args();
  a.lse = kSomeLse;
  a.struct_size = 0;
  CHECK(fj_backward(nullptr, &a) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("args->struct_size is 0") && Catch::Contains(std::to_string(v1)) &&
                               Catch::Contains("sizeof(fj_backward_args)"));
  a.struct_size = sizeof(fj_forward_args);  // a forward struct's size is no backward struct
  CHECK(fj_backward(nullptr, &a) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("args->struct_size is " + std::to_string(sizeof(fj_forward_args))));

  // Exactly the fields, without tail padding: accepted (the next check is the kernel).
  a.struct_size = v1;
  CHECK(fj_backward(nullptr, &a) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("kernel is NULL"));

  // A newer caller's larger struct: zero extra bytes are accepted, a set one is refused.
  struct Newer {
    fj_backward_args v1;
    int64_t future_field;
  } newer;
  std::memset(&newer, 0, sizeof newer);
  newer.v1.struct_size = sizeof newer;
  newer.v1.lse = kSomeLse;
  CHECK(fj_backward(nullptr, &newer.v1) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("kernel is NULL"));
  newer.future_field = 7;
  CHECK(fj_backward(nullptr, &newer.v1) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(),
             Catch::Contains("does not have") && Catch::Contains(std::to_string(sizeof(fj_backward_args))));
}

// ---- GPU ---------------------------------------------------------------------------------------

namespace {

// One problem's device memory: inputs, the forward's output and LSE, dO, and two poisoned sets
// of gradients (the C++ API's and the C ABI's).
struct Problem {
  static constexpr int64_t B = 2, S = 203, HQ = 4, HKV = 2, D = 64;
  flashjit::DeviceBuffer q, k, v, o, lse, d_o, grads[2][3];
  size_t bytes[3] = {B * S * HQ * D * 2, B * S * HKV * D * 2, B * S * HKV * D * 2};

  Problem(const flashjit::Runtime& rt, const flashjit::Kernel& kernel, uint64_t seed) {
    using flashjit::test::random_bf16;
    q = rt.alloc(bytes[0]);
    k = rt.alloc(bytes[1]);
    v = rt.alloc(bytes[2]);
    o = rt.alloc(bytes[0]);
    d_o = rt.alloc(bytes[0]);
    lse = rt.alloc(B * HQ * S * 4);
    flashjit::DeviceBuffer* in[] = {&q, &k, &v, &d_o};
    const size_t in_bytes[] = {bytes[0], bytes[1], bytes[2], bytes[0]};
    for (int i = 0; i < 4; ++i) {
      auto h = random_bf16(in_bytes[i] / 2, seed + i);
      in[i]->upload(h.data(), in_bytes[i]);
    }
    for (auto& set : grads)
      for (int i = 0; i < 3; ++i) {
        set[i] = rt.alloc(bytes[i]);
        set[i].fill_bytes(0xFF);  // NaN: a gradient element left unwritten fails the checks
      }
    flashjit::ForwardArgs f;
    shape(f);
    f.q = flashjit::bshd(q.data(), S, HQ, D);
    f.k = flashjit::test::bhsd(k.data(), S, HKV, D);
    f.v = flashjit::bshd(v.data(), S, HKV, D);
    f.o = flashjit::bshd(o.data(), S, HQ, D);
    f.lse = static_cast<float*>(lse.data());
    f.scale = 0.1f;
    kernel.forward(f);
  }

  void shape(flashjit::ProblemShape& p) const {
    p.batch = B;
    p.seq_q = p.seq_kv = S;
    p.heads_q = HQ;
    p.heads_kv = HKV;
  }

  // The backward's arguments writing into gradient set `g`; dK is BHSD memory, like K.
  flashjit::BackwardArgs args(int g) {
    using flashjit::bshd;
    flashjit::BackwardArgs a;
    shape(a);
    a.q = bshd(q.data(), S, HQ, D);
    a.k = flashjit::test::bhsd(k.data(), S, HKV, D);
    a.v = bshd(v.data(), S, HKV, D);
    a.o = bshd(o.data(), S, HQ, D);
    a.d_o = bshd(d_o.data(), S, HQ, D);
    a.dq = bshd(grads[g][0].data(), S, HQ, D);
    a.dk = flashjit::test::bhsd(grads[g][1].data(), S, HKV, D);
    a.dv = bshd(grads[g][2].data(), S, HKV, D);
    a.lse = static_cast<const float*>(lse.data());
    a.scale = 0.1f;
    a.deterministic = true;
    return a;
  }

  std::vector<uint16_t> download(int g, int i) const {
    std::vector<uint16_t> h(bytes[i] / 2);
    grads[g][i].download(h.data(), bytes[i]);
    return h;
  }
};

// The C struct of the same call.
fj_backward_args c_args(const flashjit::BackwardArgs& b) {
  using flashjit::test::to_c;
  fj_backward_args a = empty_args();
  a.batch = b.batch;
  a.seq_q = b.seq_q;
  a.seq_kv = b.seq_kv;
  a.heads_q = b.heads_q;
  a.heads_kv = b.heads_kv;
  a.q = to_c(b.q);
  a.k = to_c(b.k);
  a.v = to_c(b.v);
  a.o = to_c(b.o);
  a.d_o = to_c(b.d_o);
  a.dq = to_c(b.dq);
  a.dk = to_c(b.dk);
  a.dv = to_c(b.dv);
  a.lse = b.lse;
  a.scale = b.scale;
  a.deterministic = b.deterministic ? 1 : 0;
  return a;
}

}  // namespace

TEST_CASE("capi: backward through the C ABI matches Kernel::backward bit for bit", "[capi][gpu]") {
  REQUIRE_GPU_OR_SKIP();
  using namespace flashjit;
  test::CapiGpu c;
  fj_status st = fj_runtime_create(0, &c.crt);
  INFO(last_error());
  REQUIRE(st == FJ_OK);
  st = fj_compile(c.crt, kSpec, &c.ckernel);
  INFO(last_error());
  REQUIRE(st == FJ_OK);
  Runtime rt = Runtime::create(0);
  Kernel kernel = rt.compile(AttentionSpec::from_yaml(kSpec));

  const uint64_t seed = std::random_device{}();
  INFO("seed " << seed);
  Problem p(rt, kernel, seed);
  kernel.backward(p.args(0));
  const fj_backward_args a = c_args(p.args(1));
  st = fj_backward(c.ckernel, &a);
  INFO(last_error());
  REQUIRE(st == FJ_OK);
  CHECK(last_error().empty());
  rt.synchronize();

  const char* names[] = {"dq", "dk", "dv"};
  for (int i = 0; i < 3; ++i) {
    INFO(names[i]);
    const std::vector<uint16_t> cpp = p.download(0, i), capi = p.download(1, i);
    CHECK(cpp == capi);
    // Not vacuous: every element was written (the 0xFFFF poison is gone) and most are nonzero.
    size_t poisoned = 0, nonzero = 0;
    for (uint16_t x : capi) {
      poisoned += x == 0xFFFF;
      nonzero += (x & 0x7FFF) != 0;
    }
    CHECK(poisoned == 0);
    CHECK(nonzero > capi.size() / 2);
  }

  // Argument errors from the C layer and from Kernel::backward alike are FJ_ERR_USAGE naming it.
  fj_backward_args bad = a;
  bad.lse = nullptr;
  CHECK(fj_backward(c.ckernel, &bad) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("args->lse is NULL"));
  bad = a;
  bad.dk.data = bad.k.data;
  CHECK(fj_backward(c.ckernel, &bad) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("same address as an input"));
  bad = a;
  bad.d_o.stride[3] = 2;
  CHECK(fj_backward(c.ckernel, &bad) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("d_o.stride[3]"));
  bad = a;
  bad.num_params = 1;
  CHECK(fj_backward(c.ckernel, &bad) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("fj_backward: args->params is NULL"));
  // A causal mask has an exact closed form: no block map to build (tests/test_gpu_backward.cpp
  // builds and reuses one through the C++ API).
  fj_block_map* map = nullptr;
  CHECK(fj_backward_block_map_build(c.ckernel, &a, &map) == FJ_ERR_USAGE);
  CHECK_THAT(last_error(), Catch::Contains("exact closed form"));
  CHECK(map == nullptr);
}

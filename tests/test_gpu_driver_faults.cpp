// Driver faults on the GPU: out of device memory, a module the driver cannot load and a stream of
// another CUDA context each give a typed flashjit::Error whose message names
// the cause, and afterwards the same Runtime and Kernel run a forward (and a backward) that verify
// against the fp64 reference. Each verified run prints a GPUCASE line (scripts/gpu_check.sh).
//
// The GPU machine has one device, so "a context from another device" is played by a second context
// on the same device (cuCtxCreate): flashjit compares the stream's context (cuStreamGetCtx) with its
// own, which is the same check that catches another device's stream.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <random>
#include <type_traits>

#include "tests/gpu_case.hpp"
#include "tests/support.hpp"

using namespace flashjit;

namespace {

// The driver calls the test makes itself (streams and contexts the runtime must not create).
struct TestDriver {
  int (*ctx_create)(void**, unsigned, int) = nullptr;            // cuCtxCreate_v2
  int (*ctx_create_v4)(void**, void*, unsigned, int) = nullptr;  // cuCtxCreate_v4 (CUDA 13)
  int (*ctx_destroy)(void*) = nullptr;
  int (*ctx_push)(void*) = nullptr;
  int (*ctx_pop)(void**) = nullptr;
  int (*primary_retain)(void**, int) = nullptr;
  int (*primary_release)(int) = nullptr;
  int (*stream_create)(void**, unsigned) = nullptr;
  int (*stream_destroy)(void*) = nullptr;

  bool load() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    };
    sym(ctx_create, "cuCtxCreate_v2");
    sym(ctx_create_v4, "cuCtxCreate_v4");
    sym(ctx_destroy, "cuCtxDestroy_v2");
    sym(ctx_push, "cuCtxPushCurrent_v2");
    sym(ctx_pop, "cuCtxPopCurrent_v2");
    sym(primary_retain, "cuDevicePrimaryCtxRetain");
    sym(primary_release, "cuDevicePrimaryCtxRelease_v2");
    sym(stream_create, "cuStreamCreate");
    sym(stream_destroy, "cuStreamDestroy_v2");
    return (ctx_create || ctx_create_v4) && ctx_destroy && ctx_push && ctx_pop && primary_retain && primary_release &&
           stream_create && stream_destroy;
  }
  // A new context on device 0, current on this thread afterwards (as cuCtxCreate leaves it).
  void* create_context() const {
    void* ctx = nullptr;
    const int r = ctx_create ? ctx_create(&ctx, 0, 0) : ctx_create_v4(&ctx, nullptr, 0, 0);
    return r == 0 ? ctx : nullptr;
  }
  // A stream in `ctx` (pushed for the call). A blocking stream: it waits for the uploads and fills,
  // which run on the legacy default stream.
  void* stream_in(void* ctx) const {
    void* stream = nullptr;
    void* popped = nullptr;
    if (ctx_push(ctx) != 0) return nullptr;
    if (stream_create(&stream, 0 /* CU_STREAM_DEFAULT */) != 0) stream = nullptr;
    ctx_pop(&popped);
    return stream;
  }
};

AttentionSpec fault_spec() { return test::make_spec(DType::bf16, 64, 64, "causal"); }

Kernel compile(const Runtime& rt) {
  CompileOptions opts;
  opts.autotune = "off";
  opts.backward = true;
  return rt.compile(fault_spec(), opts);
}

test::Case small_case() { return test::Case::of(fault_spec(), 192, 256, 2, 4, 2); }

// A forward of `kernel` on a small problem (on `stream`), verified against the fp64 reference.
bool forward_verifies(const Runtime& rt, const Kernel& kernel, const char* label, void* stream = nullptr) {
  const test::Case c = small_case();
  std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, 11);
  dp->args.stream = stream;
  rt.synchronize();  // the uploads and the NaN fill are done before the kernel reads or writes
  kernel.forward(dp->args);
  rt.synchronize();
  std::vector<uint16_t> out(size_t(c.batch * c.seq_q * c.heads_q * 64));
  std::vector<float> lse(size_t(c.batch * c.heads_q * c.seq_q));
  dp->o.download(out.data(), out.size() * 2);
  dp->lse.download(lse.data(), lse.size() * 4);
  const ref::Verdict v = ref::verify(dp->p, out, &lse);
  std::printf("GPUCASE faults forward %s bf16 d=64 causal b=2 h=4/2 sq=192 skv=256 %s\n", label, v.message.c_str());
  std::fflush(stdout);
  return v.ok;
}

// Forward, then backward of `kernel` on a small problem, the gradients verified.
bool backward_verifies(const Runtime& rt, const Kernel& kernel, const char* label) {
  const test::Case c = small_case();
  std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, 12);
  kernel.forward(dp->args);
  std::mt19937_64 rng(13);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<uint16_t> d_o(size_t(c.batch * c.seq_q * c.heads_q * 64));
  for (auto& x : d_o) x = ref::to_half_bits(n(rng), DType::bf16);
  const size_t nq = d_o.size(), nkv = size_t(c.batch * c.seq_kv * c.heads_kv * 64);
  DeviceBuffer d_o_dev = rt.alloc(nq * 2), dq = rt.alloc(nq * 2), dk = rt.alloc(nkv * 2), dv = rt.alloc(nkv * 2);
  d_o_dev.upload(d_o.data(), nq * 2);
  for (DeviceBuffer* g : {&dq, &dk, &dv}) g->fill_bytes(0xFF);
  BackwardArgs b;
  static_cast<ProblemShape&>(b) = c;
  b.q = dp->args.q, b.k = dp->args.k, b.v = dp->args.v, b.o = dp->args.o, b.lse = dp->args.lse;
  b.d_o = bshd(d_o_dev.data(), c.seq_q, c.heads_q, 64);
  b.dq = bshd(dq.data(), c.seq_q, c.heads_q, 64);
  b.dk = bshd(dk.data(), c.seq_kv, c.heads_kv, 64);
  b.dv = bshd(dv.data(), c.seq_kv, c.heads_kv, 64);
  kernel.backward(b);
  rt.synchronize();
  std::vector<uint16_t> gq(nq), gk(nkv), gv(nkv);
  dq.download(gq.data(), nq * 2), dk.download(gk.data(), nkv * 2), dv.download(gv.data(), nkv * 2);
  const ref::BackwardVerdict v = ref::verify_backward(dp->p, d_o, gq, gk, gv);
  std::printf("GPUCASE faults backward %s bf16 d=64 causal b=2 h=4/2 sq=192 skv=256 %s\n", label, v.message.c_str());
  std::fflush(stdout);
  return v.ok;
}

// The flashjit::Error `fn` throws (FAIL when it throws nothing or something else).
template <class Fn>
Error error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  FAIL("no flashjit::Error was thrown");
  return Error(ErrorKind::internal, "unreachable");
}

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// Backward arguments with a workspace of 1024 * 1024 * 65536 rows * 4 bytes (256 GiB, more than
// any GPU has) over tiny buffers: every tensor's strides are 0 but the head dim's, so each spans
// one 64-element row. pack_backward accepts it; the workspace allocation cannot succeed.
struct HugeBackward {
  std::vector<DeviceBuffer> buffers;
  BackwardArgs args;
  explicit HugeBackward(const Runtime& rt) {
    for (int i = 0; i < 8; ++i) buffers.push_back(rt.alloc(256));
    auto row = [&](int i) {
      Tensor t;
      t.data = buffers[i].data();
      return t;  // strides {0, 0, 0, 1}
    };
    args.batch = 1024, args.heads_q = args.heads_kv = 1024, args.seq_q = args.seq_kv = 65536;
    args.q = row(0), args.k = row(1), args.v = row(2), args.o = row(3), args.d_o = row(4);
    args.dq = row(5), args.dk = row(6), args.dv = row(7);
    args.lse = static_cast<const float*>(buffers[0].data());
  }
};

}  // namespace

TEST_CASE(
    "driver faults: out of device memory is ErrorKind::out_of_memory naming the allocation and its bytes, "
    "and the runtime works after it",
    "[gpu][faults]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  Kernel kernel = compile(rt);
  // An allocation of 1 PiB.
  const Error alloc = error_of([&] { rt.alloc(size_t(1) << 50); });
  CHECK(alloc.kind() == ErrorKind::out_of_memory);
  CHECK_THAT(alloc.what(), Catch::Contains("out of device memory: Runtime::alloc of 1125899906842624 bytes") &&
                               Catch::Contains("CUDA_ERROR_OUT_OF_MEMORY") && Catch::Contains("free"));
  // A backward whose stream-ordered workspace does not fit: nothing is launched.
  HugeBackward huge(rt);
  const Error backward = error_of([&] { kernel.backward(huge.args); });
  CHECK(backward.kind() == ErrorKind::out_of_memory);
  CHECK_THAT(backward.what(),
             Catch::Contains("cuMemAllocFromPoolAsync(backward workspace) of 274877906944 bytes (256.0 GiB)") &&
                 Catch::Contains("CUDA_ERROR_OUT_OF_MEMORY"));
  // The same kernel, right after: the failures left nothing allocated or broken.
  CHECK(forward_verifies(rt, kernel, "after-out-of-memory"));
  CHECK(backward_verifies(rt, kernel, "after-out-of-memory"));
}

TEST_CASE(
    "driver faults: PTX the assembler cannot load (an override) is a usage error naming the kernel, the folder and "
    "the assembler's error, and the runtime compiles and runs after it",
    "[gpu][faults]") {
  REQUIRE_GPU_OR_SKIP();
  Runtime rt = Runtime::create(0);
  CompileOptions ptx_opts;
  ptx_opts.arch = rt.device().arch();
  const CompiledKernel ref_kernel = compile_to_ptx(fault_spec(), ptx_opts);
  // The kernel's own PTX with one instruction that does not exist: it has the .version, .target and
  // .entry flashjit checks an override for, so only the assembler (ptxas or the driver's JIT,
  // FLASHJIT_PTXAS) can reject it.
  std::string ptx = ref_kernel.ptx;
  const size_t entry = ptx.find(".entry " + ref_kernel.entry);
  REQUIRE(entry != std::string::npos);
  const size_t body = ptx.find('{', entry);
  REQUIRE(body != std::string::npos);
  ptx.insert(body + 1, "\n\tflashjit_not_an_instruction.b32 %r1;\n");
  test::TempDir dir;
  const std::string folder = dir.path + "/" + ref_kernel.key;
  REQUIRE(test::run_command("mkdir -p '" + folder + "'").code == 0);
  std::ofstream(folder + "/ptx.ptx") << ptx;

  CompileOptions opts;
  opts.autotune = "off";
  opts.override_dir = dir.path;
  const Error e = error_of([&] { rt.compile(fault_spec(), opts); });
  CHECK(e.kind() == ErrorKind::usage);
  CHECK_THAT(e.what(), Catch::Contains("could not assemble kernel " + ref_kernel.entry) && Catch::Contains(folder) &&
                           Catch::Contains("FLASHJIT_OVERRIDE_DIR"));
  // The assembler's own complaint: ptxas names the instruction, the driver gives its error code.
  if (rt.device().assembler == "driver") CHECK_THAT(e.what(), Catch::Contains("CUDA_ERROR_"));
  else CHECK_THAT(e.what(), Catch::Contains("flashjit_not_an_instruction") && Catch::Contains(rt.device().assembler));
  CHECK_THAT(e.what(), !Catch::Contains("flashjit bug"));
  // The same runtime compiles and runs the spec without the override.
  Kernel kernel = compile(rt);
  CHECK(forward_verifies(rt, kernel, "after-failed-module-load"));
}

// No destroyed-stream case: the CUDA driver documents a destroyed stream handle as undefined
// behaviour, and on the H200 (driver 580) cuStreamGetCtx on one crashed the process (SIGSEGV).
// The stream checks stay (a driver error on the caller's stream is a usage error naming it); the
// stream of another context below is the invalid stream the driver does report.

TEST_CASE(
    "driver faults: a stream of another CUDA context is a usage error naming the stream and both contexts, "
    "the kernel works after it, and a runtime made in that context accepts the stream",
    "[gpu][faults]") {
  REQUIRE_GPU_OR_SKIP();
  TestDriver drv;
  REQUIRE(drv.load());
  Runtime rt = Runtime::create(0);  // before the second context exists: the primary context
  Kernel kernel = compile(rt);
  void* other = drv.create_context();  // current on this thread now
  REQUIRE(other);
  void* stream = drv.stream_in(other);
  REQUIRE(stream);
  {
    Runtime rt2 = Runtime::create(0);  // the caller's current context: `other`
    void* popped = nullptr;
    REQUIRE(drv.ctx_pop(&popped) == 0);
    CHECK(popped == other);

    const test::Case c = small_case();
    std::unique_ptr<test::DeviceProblem> dp = test::upload_problem(rt, c, 5);
    dp->args.stream = stream;
    const Error f = error_of([&] { kernel.forward(dp->args); });
    CHECK(f.kind() == ErrorKind::usage);
    CHECK_THAT(f.what(),
               Catch::StartsWith("forward: stream " + hex(stream) + " belongs to CUDA context " + hex(other)) &&
                   Catch::Contains("(device 0)") && Catch::Contains("not to this runtime's context"));
    BackwardArgs b;
    static_cast<ProblemShape&>(b) = c;
    b.q = dp->args.q, b.k = dp->args.k, b.v = dp->args.v, b.o = dp->args.o, b.lse = dp->args.lse;
    DeviceBuffer grads = rt.alloc(size_t(c.batch * c.seq_kv * c.heads_q * 64 * 2) * 4);
    char* g = static_cast<char*>(grads.data());
    const size_t step = size_t(c.batch * c.seq_kv * c.heads_q * 64 * 2);
    b.d_o = bshd(g, c.seq_q, c.heads_q, 64), b.dq = bshd(g + step, c.seq_q, c.heads_q, 64);
    b.dk = bshd(g + 2 * step, c.seq_kv, c.heads_kv, 64), b.dv = bshd(g + 3 * step, c.seq_kv, c.heads_kv, 64);
    b.stream = stream;
    const Error bw = error_of([&] { kernel.backward(b); });
    CHECK(bw.kind() == ErrorKind::usage);
    CHECK_THAT(bw.what(), Catch::StartsWith("backward: stream " + hex(stream) + " belongs to CUDA context"));

    CHECK(forward_verifies(rt, kernel, "after-foreign-stream"));
    // The stream's own context's runtime runs on it.
    Kernel kernel2 = compile(rt2);
    CHECK(forward_verifies(rt2, kernel2, "runtime-in-second-context", stream));
  }
  void* popped = nullptr;
  REQUIRE(drv.ctx_push(other) == 0);
  CHECK(drv.stream_destroy(stream) == 0);
  drv.ctx_pop(&popped);
  CHECK(drv.ctx_destroy(other) == 0);
}

/* What compute-sanitizer's racecheck makes of the hand-over patterns a warp-specialised kernel
 * uses, on kernels small enough to read whole: one writer warp hands a value to one reader warp
 * through one shared word, four rounds, and the readers sum what they read (0+1+2+3 = 6).
 *
 *   arrive_sync   the persistent forward's hand-over: the writer stores, `bar.arrive`s at "full"
 *                 and `bar.sync`s at "empty" before the next store; the readers `bar.sync` at
 *                 "full", load, `bar.arrive` at "empty" (PTX ISA §9.7.13.1). Correct.
 *   sync_sync     both sides `bar.sync` at one barrier per round, the word double-buffered.
 *                 Correct; the writer waits for the readers every round.
 *   mbarrier      the same hand-over through two mbarriers (§9.7.13.15): arrive with release
 *                 semantics, try_wait.parity with acquire semantics. Correct.
 *   racy          the writer stores while the readers load, a barrier only after. A race: the
 *                 positive control.
 *
 * Usage: racecheck_probe VARIANT  (prints "VARIANT sum=N ok|WRONG"; exit 0 when the sum is 6);
 * racecheck_probe --ptx VARIANT prints the variant's PTX.
 * Run each under `compute-sanitizer --tool racecheck`. Build: cc -std=gnu11 -O2 racecheck_probe.c -ldl.
 * Only the CUDA driver (libcuda.so.1, loaded at run time) is needed; the driver JIT compiles the
 * PTX. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define HEAD ".version 8.0\n.target sm_90\n.address_size 64\n"
#define BEGIN(name)                                                                              \
  ".visible .entry " name "(.param .u64 out) {\n"                                              \
  ".reg .u32 %r<10>;\n.reg .u64 %rd<4>;\n.reg .pred %p<6>;\n"                                   \
  ".shared .align 8 .b64 bars[2];\n.shared .align 4 .u32 slot[2];\n"                             \
  "mov.u32 %r1, %tid.x;\nshr.u32 %r2, %r1, 5;\nsetp.eq.u32 %p1, %r2, 0;\n"
/* The readers' sum into out[0] (every reader thread stores the same value). */
#define END                                                                                      \
  "ld.param.u64 %rd1, [out];\ncvta.to.global.u64 %rd1, %rd1;\nst.global.u32 [%rd1], %r5;\n"   \
  "ret;\n}\n"

static const char* kPtx[][2] = {
    {"arrive_sync",
     HEAD BEGIN("arrive_sync")
     "@!%p1 bra READ;\n"
     "mov.u32 %r3, 0;\n"
     "W: setp.ne.u32 %p2, %r3, 0;\n"
     "@%p2 bar.sync 2, 64;\n"
     "setp.eq.u32 %p3, %r1, 0;\n"
     "@%p3 st.shared.u32 [slot], %r3;\n"
     "bar.arrive 1, 64;\n"
     "add.u32 %r3, %r3, 1;\nsetp.lt.u32 %p2, %r3, 4;\n@%p2 bra W;\n"
     "bar.sync 2, 64;\nret;\n"
     "READ: mov.u32 %r3, 0;\nmov.u32 %r5, 0;\n"
     "R: bar.sync 1, 64;\n"
     "ld.shared.u32 %r4, [slot];\nadd.u32 %r5, %r5, %r4;\n"
     "bar.arrive 2, 64;\n"
     "add.u32 %r3, %r3, 1;\nsetp.lt.u32 %p2, %r3, 4;\n@%p2 bra R;\n" END},
    {"sync_sync",
     HEAD BEGIN("sync_sync")
     "mov.u32 %r3, 0;\nmov.u32 %r5, 0;\nmov.u32 %r6, slot;\n"
     "L: and.b32 %r7, %r3, 1;\nshl.b32 %r7, %r7, 2;\nadd.u32 %r7, %r7, %r6;\n"
     "setp.eq.u32 %p3, %r1, 0;\n"
     "@%p3 st.shared.u32 [%r7], %r3;\n"
     "bar.sync 1, 64;\n"
     "@!%p1 ld.shared.u32 %r4, [%r7];\n@!%p1 add.u32 %r5, %r5, %r4;\n"
     "add.u32 %r3, %r3, 1;\nsetp.lt.u32 %p2, %r3, 4;\n@%p2 bra L;\n"
     "@%p1 ret;\n" END},
    {"mbarrier",
     HEAD BEGIN("mbarrier")
     "mov.u32 %r8, bars;\nadd.u32 %r9, %r8, 8;\n"  /* %r8 full (1 arrival), %r9 empty (32) */
     "setp.eq.u32 %p3, %r1, 0;\n"
     "@%p3 mbarrier.init.shared::cta.b64 [%r8], 1;\n"
     "@%p3 mbarrier.init.shared::cta.b64 [%r9], 32;\n"
     "bar.sync 0, 64;\n"
     "@!%p1 bra READ;\n"
     "mov.u32 %r3, 0;\n"
     "W: setp.eq.u32 %p2, %r3, 0;\n@%p2 bra STORE;\n"
     "add.u32 %r6, %r3, 1;\nand.b32 %r6, %r6, 1;\n" /* empty's phase r - 1 */
     "WE: mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r9], %r6;\n@!%p4 bra WE;\n"
     "STORE: @%p3 st.shared.u32 [slot], %r3;\n"
     "@%p3 mbarrier.arrive.shared::cta.b64 _, [%r8];\n"
     "add.u32 %r3, %r3, 1;\nsetp.lt.u32 %p2, %r3, 4;\n@%p2 bra W;\n"
     "ret;\n"
     "READ: mov.u32 %r3, 0;\nmov.u32 %r5, 0;\n"
     "R: and.b32 %r6, %r3, 1;\n"
     "WF: mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r8], %r6;\n@!%p4 bra WF;\n"
     "ld.shared.u32 %r4, [slot];\nadd.u32 %r5, %r5, %r4;\n"
     "mbarrier.arrive.shared::cta.b64 _, [%r9];\n"
     "add.u32 %r3, %r3, 1;\nsetp.lt.u32 %p2, %r3, 4;\n@%p2 bra R;\n" END},
    {"racy",
     HEAD BEGIN("racy")
     "mov.u32 %r3, 0;\nmov.u32 %r5, 0;\n"
     "setp.eq.u32 %p3, %r1, 0;\n"
     "L: @%p3 st.shared.u32 [slot], %r3;\n"
     "@!%p1 ld.shared.u32 %r4, [slot];\n@!%p1 add.u32 %r5, %r5, %r4;\n"
     "bar.sync 1, 64;\n"
     "add.u32 %r3, %r3, 1;\nsetp.lt.u32 %p2, %r3, 4;\n@%p2 bra L;\n"
     "@%p1 ret;\n" END},
};

typedef int (*Fn)();
static Fn get(void* lib, const char* name) {
  Fn f = (Fn)dlsym(lib, name);
  if (!f) fprintf(stderr, "racecheck_probe: %s not in libcuda\n", name);
  return f;
}
#define CHECK(call)                                                       \
  do {                                                                    \
    int rc_ = (call);                                                     \
    if (rc_) {                                                            \
      fprintf(stderr, "racecheck_probe: %s failed: CUresult %d\n", #call, rc_); \
      return 2;                                                           \
    }                                                                     \
  } while (0)

int main(int argc, char** argv) {
  const int n = sizeof kPtx / sizeof kPtx[0];
  const int ptx = argc == 3 && !strcmp(argv[1], "--ptx");
  int v = -1;
  for (int i = 0; (argc == 2 || ptx) && i < n; ++i)
    if (!strcmp(argv[argc - 1], kPtx[i][0])) v = i;
  if (v >= 0 && ptx) {
    fputs(kPtx[v][1], stdout);
    return 0;
  }
  if (v < 0) {
    fprintf(stderr, "usage: racecheck_probe [--ptx] arrive_sync|sync_sync|mbarrier|racy\n");
    return 2;
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "racecheck_probe: no CUDA driver (libcuda.so.1): %s\n", dlerror());
    return 2;
  }
  int dev = 0;
  void *ctx = 0, *mod = 0, *fn = 0;
  unsigned long long out = 0;
  unsigned sum = 0;
  CHECK(get(lib, "cuInit")(0));
  CHECK(get(lib, "cuDeviceGet")(&dev, 0));
  CHECK(get(lib, "cuDevicePrimaryCtxRetain")(&ctx, dev));
  CHECK(get(lib, "cuCtxSetCurrent")(ctx));
  CHECK(get(lib, "cuModuleLoadData")(&mod, kPtx[v][1]));
  CHECK(get(lib, "cuModuleGetFunction")(&fn, mod, kPtx[v][0]));
  CHECK(get(lib, "cuMemAlloc_v2")(&out, (size_t)4));
  CHECK(get(lib, "cuMemsetD32_v2")(out, 0xffffffffu, (size_t)1));
  void* args[] = {&out};
  CHECK(get(lib, "cuLaunchKernel")(fn, 1, 1, 1, 64, 1, 1, 0, (void*)0, args, (void**)0));
  CHECK(get(lib, "cuCtxSynchronize")());
  CHECK(get(lib, "cuMemcpyDtoH_v2")(&sum, out, (size_t)4));
  printf("%s sum=%u %s\n", kPtx[v][0], sum, sum == 6 ? "ok" : "WRONG");
  return sum == 6 ? 0 : 1;
}

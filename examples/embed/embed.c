/* Embedding flashjit from C through its C ABI (pkg-config --cflags --libs flashjit): compile a spec
 * to PTX (no GPU needed), then, when a GPU is present, run it once on inputs that make the answer
 * known: with every V row equal to 1, each output element is exactly 1 whatever q and k are.
 * The device memory comes from the CUDA driver API, loaded with dlopen so that this program builds
 * and runs on machines without CUDA. Exit 0 on success (including "no GPU here: compiled only"). */
#include <flashjit/flashjit.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char* kSpec =
    "name: embed_example_c\n"
    "dtype: fp16\n"
    "head_dim: 64\n"
    "mask: causal\n";

enum { S = 128, H = 2, D = 64 };

static int fail(const char* what, fj_status st) {
  fprintf(stderr, "embed_c: %s: %s: %s\n", what, fj_status_name(st), fj_last_error());
  return 1;
}

/* The few CUDA driver entry points used here (cuda.h types reduced to what the calls need). */
typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_primary_fn)(void**, int);
typedef int (*cu_set_fn)(void*);
typedef int (*cu_alloc_fn)(unsigned long long*, size_t);
typedef int (*cu_free_fn)(unsigned long long);
typedef int (*cu_copy_fn)(void*, unsigned long long, size_t);
typedef int (*cu_memset16_fn)(unsigned long long, unsigned short, size_t);
typedef int (*cu_sync_fn)(void);

static int run_on_gpu(fj_runtime* rt) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (!cuda) return fprintf(stderr, "embed_c: %s\n", dlerror()), 1;
  cu_primary_fn retain;
  cu_set_fn set_current;
  cu_alloc_fn mem_alloc;
  cu_free_fn mem_free;
  cu_copy_fn to_host;
  cu_memset16_fn memset16;
  cu_sync_fn sync;
  /* POSIX's way to take a function from dlsym (ISO C has no object-to-function pointer cast). */
#define LOAD(fn, name) (*(void**)(&(fn)) = dlsym(cuda, name)) != NULL
  const int loaded = LOAD(retain, "cuDevicePrimaryCtxRetain") && LOAD(set_current, "cuCtxSetCurrent") &&
                     LOAD(mem_alloc, "cuMemAlloc_v2") && LOAD(mem_free, "cuMemFree_v2") &&
                     LOAD(to_host, "cuMemcpyDtoH_v2") && LOAD(memset16, "cuMemsetD16_v2") &&
                     LOAD(sync, "cuCtxSynchronize");
#undef LOAD
  void* ctx = NULL;
  if (!loaded || retain(&ctx, 0) != 0 || set_current(ctx) != 0)
    return fprintf(stderr, "embed_c: cannot use the CUDA driver's primary context\n"), 1;

  fj_kernel* kernel = NULL;
  fj_status st = fj_compile(rt, kSpec, &kernel);
  if (st != FJ_OK) return fail("fj_compile", st);
  const size_t n = (size_t)S * H * D;
  unsigned long long q = 0, k = 0, v = 0, o = 0;
  if (mem_alloc(&q, n * 2) || mem_alloc(&k, n * 2) || mem_alloc(&v, n * 2) || mem_alloc(&o, n * 2))
    return fprintf(stderr, "embed_c: cuMemAlloc failed\n"), 1;
  memset16(q, 0x3c00, n); /* fp16 1.0 */
  memset16(k, 0xb800, n); /* fp16 -0.5 */
  memset16(v, 0x3c00, n);
  memset16(o, 0x7e00, n); /* NaN: an output the kernel did not write shows */
  const int64_t stride[4] = {(int64_t)S * H * D, H * D, D, 1};
  fj_forward_args a = {.struct_size = sizeof(fj_forward_args)};
  a.batch = 1, a.seq_q = a.seq_kv = S, a.heads_q = a.heads_kv = H;
  a.q.data = (void*)(uintptr_t)q, a.k.data = (void*)(uintptr_t)k, a.v.data = (void*)(uintptr_t)v;
  a.o.data = (void*)(uintptr_t)o;
  memcpy(a.q.stride, stride, sizeof stride), memcpy(a.k.stride, stride, sizeof stride);
  memcpy(a.v.stride, stride, sizeof stride), memcpy(a.o.stride, stride, sizeof stride);
  if ((st = fj_forward(kernel, &a)) != FJ_OK) return fail("fj_forward", st);
  unsigned short* host = malloc(n * 2);
  int bad = sync() != 0 || to_host(host, o, n * 2) != 0;
  for (size_t i = 0; !bad && i < n; ++i) bad = host[i] != 0x3c00;
  printf("ran on device 0: %s\n", bad ? "WRONG output (expected every element 1.0)" : "every output element is 1.0");
  free(host);
  mem_free(q), mem_free(k), mem_free(v), mem_free(o);
  fj_kernel_destroy(kernel);
  return bad;
}

int main(void) {
  char *ptx = NULL, *entry = NULL;
  fj_status st = fj_compile_ptx(kSpec, "sm_90a", &ptx, &entry);
  if (st != FJ_OK) return fail("fj_compile_ptx", st);
  printf("flashjit %s (header %d.%d.%d): %s, %zu bytes of PTX\n", fj_version(), FLASHJIT_VERSION_MAJOR,
         FLASHJIT_VERSION_MINOR, FLASHJIT_VERSION_PATCH, entry, strlen(ptx));
  fj_free(ptx);
  fj_free(entry);

  fj_runtime* rt = NULL;
  st = fj_runtime_create(0, &rt);
  if (st == FJ_ERR_NO_GPU) {
    printf("no GPU here (%s): compiled only\n", fj_last_error());
    return 0;
  }
  if (st != FJ_OK) return fail("fj_runtime_create", st);
  const int rc = run_on_gpu(rt);
  fj_runtime_destroy(rt);
  return rc;
}

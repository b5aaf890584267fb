/* flashjit C ABI: compile attention specs and run the forward and backward passes from C or any FFI.
 *
 * Rules of this interface:
 * - Every function that can fail returns an fj_status; on failure fj_last_error() holds a
 *   message for the calling thread (it is "" after a call that succeeded). No C++ exception
 *   ever crosses this boundary.
 * - A NULL pointer where an object is required is FJ_ERR_USAGE with a message naming the
 *   argument. Destroy/free functions accept NULL and do nothing.
 * - Handles are thread-safe: one fj_runtime and its kernels may be used from several threads.
 *   A kernel keeps its runtime's CUDA context alive, so kernels and runtimes may be destroyed in
 *   any order.
 * - Structs that may grow start with `size_t struct_size`, which the caller sets to
 *   sizeof(the struct) as compiled against its header. The library rejects sizes smaller than
 *   the first version of the struct and reads only the fields it knows; bytes past what it
 *   knows must be zero (a newer caller asking for a feature this library lacks is an error,
 *   never silently ignored).
 */
#ifndef FLASHJIT_H
#define FLASHJIT_H

#include <stddef.h>
#include <stdint.h>

#include "flashjit/version.h" /* FLASHJIT_VERSION_MAJOR, _MINOR, _PATCH */

#if defined(FLASHJIT_BUILDING)
#define FJ_API __attribute__((visibility("default")))
#else
#define FJ_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status and errors -------------------------------------------------------------------- */

typedef enum fj_status {
  FJ_OK = 0,
  FJ_ERROR = 1,          /* a failure that fits no other code (e.g. out of host memory) */
  FJ_ERR_SPEC = 2,       /* the spec is malformed or asks for something flashjit cannot build */
  FJ_ERR_USAGE = 3,      /* bad arguments: NULL pointers, shapes, strides, alignment, sizes, a stream
                            that is destroyed or belongs to another CUDA context */
  FJ_ERR_CUDA = 4,       /* a CUDA driver call failed (e.g. a kernel faulted) */
  FJ_ERR_OUT_OF_MEMORY = 5, /* out of device memory; the message names the allocation and its bytes */
  FJ_ERR_NO_GPU = 69,    /* no CUDA driver, no such device, or a device flashjit cannot use */
  FJ_ERR_INTERNAL = 70   /* a flashjit bug (including generated code the PTX JIT rejected) */
} fj_status;

/* The message of the last fj_* call on this thread that returned a status; "" after success.
   Valid until this thread's next fj_* call. Never NULL. */
FJ_API const char* fj_last_error(void);

/* "FJ_OK", "FJ_ERR_SPEC", ... ("FJ_UNKNOWN_STATUS" for other values). Static storage. */
FJ_API const char* fj_status_name(fj_status status);

/* The flashjit version, e.g. "0.1.0". Static storage. */
FJ_API const char* fj_version(void);

/* Frees memory the library returned to the caller (e.g. fj_compile_ptx's strings). NULL is ok. */
FJ_API void fj_free(void* p);

/* ---- compilation without a GPU ------------------------------------------------------------- */

/* Compiles a YAML spec to PTX text for `arch` ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a";
   NULL or "" = sm_90a) with the heuristic tile config. *ptx_out (and *entry_out, the kernel's
   entry point name, when entry_out is not NULL) are NUL-terminated strings to release with
   fj_free. On failure they are set to NULL. Needs no driver and no device. */
FJ_API fj_status fj_compile_ptx(const char* spec_yaml, const char* arch, char** ptx_out, char** entry_out);

/* ---- runtime and kernels ------------------------------------------------------------------- */

typedef struct fj_runtime fj_runtime; /* opaque; one per device */
typedef struct fj_kernel fj_kernel;   /* opaque; a compiled, loaded spec; immutable */
typedef struct fj_block_map fj_block_map; /* opaque; a mask's key-tile lists on the device */

/* Opens `device` (uses the thread's current CUDA context if there is one, else the device's
   primary context). FJ_ERR_NO_GPU when libcuda.so.1 cannot be loaded or the device is missing. */
FJ_API fj_status fj_runtime_create(int device, fj_runtime** out);
FJ_API void fj_runtime_destroy(fj_runtime* runtime);

/* Compiles a YAML spec (DSL text, README "Specs") for the runtime's device and loads it.
   FJ_ERR_SPEC with file:line:col messages for a bad spec. */
FJ_API fj_status fj_compile(fj_runtime* runtime, const char* spec_yaml, fj_kernel** out);
FJ_API void fj_kernel_destroy(fj_kernel* kernel);

/* What a kernel is: for logs, benchmarks and tools. Strings are owned by the kernel and valid
   until fj_kernel_destroy. Set struct_size = sizeof(fj_kernel_info) before the call. */
typedef struct fj_kernel_info {
  size_t struct_size;
  const char* key;            /* content hash naming the kernel (dump folders, caches) */
  const char* entry;          /* PTX entry point */
  const char* description;    /* template, dtype, dims, mask, tile config */
  const char* arch;           /* e.g. "sm_90a" */
  const char* config_reason;  /* why this tile config was chosen */
  const char* spec;           /* the canonical spec text */
  const char* ptx;            /* the PTX that was loaded */
  int block_m, block_n, num_warps, num_stages; /* the tile config */
  int threads;                /* per CTA */
  int shared_bytes;           /* dynamic shared memory per CTA */
  int registers;              /* per thread, from the driver */
  int spill_bytes;            /* local memory per thread, from the driver */
  int head_dim_qk, head_dim_v;
} fj_kernel_info;

FJ_API fj_status fj_kernel_get_info(const fj_kernel* kernel, fj_kernel_info* out);

/* Blocks until a tiered compile's full kernel has loaded (Kernel::wait_full in flashjit.hpp):
   fj_compile may return with the kernel's quick form serving, the same results bit for bit,
   1-10% slower. Returns at once otherwise. Call it before timing the kernel. */
FJ_API fj_status fj_kernel_wait_full(const fj_kernel* kernel);

/* ---- the forward pass ---------------------------------------------------------------------- */

/* A device tensor viewed as [batch, seq, heads, dim]; strides in elements; stride[3] must be 1.
   BSHD and BHSD memory both work through strides. Pointers must be 16-byte aligned. */
typedef struct fj_tensor {
  void* data;
  int64_t stride[4];
} fj_tensor;

/* A value for one of the spec's params (i32 params take integral values). */
typedef struct fj_param {
  const char* name;
  double value;
} fj_param;

/* Device memory for one of the spec's tensors: `numel` elements of its declared type. */
typedef struct fj_buffer {
  const char* name;
  const void* data;
  int64_t numel;
} fj_buffer;

/* Initialise with `fj_forward_args a = {.struct_size = sizeof(fj_forward_args)};` (C99) or
   `fj_forward_args a{}; a.struct_size = sizeof a;` (C++): every other field zero, then fill them in. */
typedef struct fj_forward_args {
  size_t struct_size;                        /* sizeof(fj_forward_args), for ABI growth */
  int64_t batch, seq_q, seq_kv, heads_q, heads_kv;
  fj_tensor q, k, v, o;                      /* device pointers, strides in elements */
  float* lse;                                /* [batch, heads_q, seq_q] fp32 natural log, or NULL */
  float scale;                               /* 0 → 1/sqrt(d_qk) */
  const fj_param* params;   int num_params;   /* the spec's params; omitted ones take defaults */
  const fj_buffer* buffers; int num_buffers;  /* the spec's tensors, all required */
  void* stream;                              /* CUstream (or cudaStream_t); NULL = legacy default */
  /* Appended after the first published layout (struct_size tells the two apart):              */
  const fj_block_map* block_map;             /* from fj_block_map_build for these sizes, params
                                                and tensor contents, or NULL = rebuild per call */
  int num_splits;                            /* split-KV: 0 = automatic, 1 = never, 2..128 = split
                                                each row's keys into this many pieces */
  const int32_t* cu_seqlens_q;               /* varlen: batch + 1 token offsets (int32, device) of */
  const int32_t* cu_seqlens_kv;              /* q/o and of k/v, or both NULL (flashjit.hpp's     */
  int64_t max_seqlen_q, max_seqlen_kv;       /* ForwardArgs says how packed sequences are laid out) */
  const int32_t* block_table;                /* paged K/V: [batch, max_pages_per_seq] page ids    */
  int64_t page_size, max_pages_per_seq;      /* (int32, device), or NULL; flashjit.hpp's         */
  const int32_t* seqused_kv;                 /* ForwardArgs says how pages are laid out          */
} fj_forward_args;

/* Checks shapes, strides and alignment (FJ_ERR_USAGE naming the argument), then launches
   asynchronously on args->stream. Errors inside the kernel surface at the next synchronisation.
   A mask that reads tensors needs a block map (FlexAttention's BlockMask): without
   args->block_map, a pre-pass rebuilds it on the stream before every launch.
   The tile config comes from FLASHJIT_AUTOTUNE (default quick): the first call of a shape bucket
   without a stored tuning synchronises args->stream and tunes it (docs/autotune.md), except on a
   stream capturing a CUDA graph, where it runs the heuristic config and decides nothing. */
FJ_API fj_status fj_forward(const fj_kernel* kernel, const fj_forward_args* args);

/* Runs the block-map pre-pass once for args' sizes, params and tensors (args->block_map must be
   NULL), so later fj_forward calls with the same sizes, params and tensor contents skip it.
   FJ_ERR_USAGE when the kernel's mask has an exact closed form (it needs no map), or when a
   map is later passed with other sizes or params. Rebuild it when the tensors change. */
FJ_API fj_status fj_block_map_build(const fj_kernel* kernel, const fj_forward_args* args, fj_block_map** out);
FJ_API void fj_block_map_destroy(fj_block_map* map);

/* ---- the backward pass --------------------------------------------------------------------- */

/* The gradients of one fj_forward call (FlashAttention-2's backward: P is recomputed from the
   forward's LSE, never stored). Sizes, q, k, v, scale, params and buffers as given to that
   fj_forward. Initialise as fj_forward_args: `fj_backward_args a = {.struct_size =
   sizeof(fj_backward_args)};` (C99) or `fj_backward_args a{}; a.struct_size = sizeof a;` (C++). */
typedef struct fj_backward_args {
  size_t struct_size;                        /* sizeof(fj_backward_args), for ABI growth */
  int64_t batch, seq_q, seq_kv, heads_q, heads_kv;
  fj_tensor q, k, v;                         /* the forward's inputs */
  fj_tensor o;                               /* the forward's output */
  fj_tensor d_o;                             /* dL/dO, shaped like o */
  fj_tensor dq, dk, dv;                      /* written: dL/dQ, dL/dK, dL/dV, shaped like q, k, v
                                                (GQA: dk, dv summed over the query heads of a group);
                                                must not share an address with an input */
  const float* lse;                          /* required: the forward's [batch, heads_q, seq_q] fp32 LSE */
  float scale;                               /* 0 → 1/sqrt(d_qk); must be the forward's */
  const fj_param* params;   int num_params;   /* the spec's params; omitted ones take defaults */
  const fj_buffer* buffers; int num_buffers;  /* the spec's tensors, all required */
  void* stream;                              /* CUstream (or cudaStream_t); NULL = legacy default */
  int deterministic;                         /* nonzero: bitwise-identical results from run to run
                                                (flashjit::BackwardArgs::deterministic says when that
                                                takes another dQ path and what it costs) */
  /* Appended after the first published layout (struct_size tells the two apart):              */
  const fj_block_map* block_map;             /* from fj_backward_block_map_build for these sizes,
                                                params and tensor contents, or NULL = rebuild per call */
} fj_backward_args;

/* Checks shapes, strides and alignment as fj_forward does (FJ_ERR_USAGE naming the argument),
   then launches asynchronously on args->stream: a D = rowsum(dO * O) pre-pass, the dK/dV kernel
   and the dQ kernel, with fp32 workspace allocated and freed on the stream (capturable in a CUDA
   graph). The backward module is compiled and loaded by the kernel's first fj_backward (with the
   backward's heuristic tile config), so that call also reports its compile errors. A mask that
   reads tensors walks block maps (FlexAttention's q_indices and kv_indices): without
   args->block_map, pre-passes rebuild them on the stream before every call. */
FJ_API fj_status fj_backward(const fj_kernel* kernel, const fj_backward_args* args);

/* Runs the backward's block-map pre-passes once for args' sizes, params and tensors (args->block_map
   must be NULL), so later fj_backward calls with the same sizes, params and tensor contents skip
   them; fj_block_map_destroy frees it. FJ_ERR_USAGE when the kernel's mask has an exact closed form
   (it needs no map), or when a map is later passed with other sizes or params, or to fj_forward.
   The tile config is chosen as fj_backward chooses it (a tuning on first use may run). */
FJ_API fj_status fj_backward_block_map_build(const fj_kernel* kernel, const fj_backward_args* args,
                                             fj_block_map** out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLASHJIT_H */

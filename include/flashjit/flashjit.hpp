// flashjit public C++ API: specs, compilation to PTX, and the GPU runtime. No LLVM or CUDA types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "flashjit/version.h"  // FLASHJIT_VERSION_MAJOR, _MINOR, _PATCH

#if defined(FLASHJIT_BUILDING)
#define FLASHJIT_API __attribute__((visibility("default")))
#else
#define FLASHJIT_API
#endif

namespace flashjit {

// ---- errors -------------------------------------------------------------------------------------

// What went wrong, coarse enough to map onto the CLI's exit codes.
enum class ErrorKind {
  spec,      // the spec or a request is malformed or asks for something unsupported (exit 2)
  usage,     // bad arguments to an API call: shapes, strides, alignment (exit 2)
  no_gpu,    // no CUDA driver or no device (exit 69)
  cuda,      // a CUDA driver call failed (exit 1)
  compile,   // LLVM or the driver's PTX JIT rejected generated code (exit 70: it is our bug)
  internal,  // a broken invariant inside flashjit (exit 70)
  // The device has too little free memory for an allocation (exit 1); the message names the
  // allocation and its bytes. Nothing was launched, and the Runtime and Kernel stay usable.
  out_of_memory,
};

class FLASHJIT_API Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// ---- the spec -----------------------------------------------------------------------------------

enum class DType { f16, bf16 };
enum class ScalarType { i32, f32 };

// A runtime scalar read by the mask or score; its value is passed at launch (never recompiles).
struct ParamDecl {
  std::string name;
  ScalarType type = ScalarType::f32;
  double default_value = 0;
};

// A device tensor read by the mask or score as name[i, ...]: row-major, contiguous. Each dim is
// one of "batch", "heads_q", "heads_kv", "seq_q", "seq_kv" or a fixed size such as "16".
struct TensorDecl {
  std::string name;
  ScalarType type = ScalarType::i32;
  std::vector<std::string> dims;
};

// Narrows (or widens) the autotune space; empty lists mean the defaults for the head dim.
struct TuneSpace {
  std::vector<int> block_m, block_n, num_warps, num_stages;
};

// The attention variant (README, "Specs"). `mask` is a bool expression of b, h, h_kv, q, kv, seq_q,
// seq_kv, params and tensors ("none" = every key visible; shorthands causal, causal_br,
// window(l, r), prefix(n), document(t)); `score` an f32 expression of `score` ("score" = identity).
struct FLASHJIT_API AttentionSpec {
  std::string name;
  DType dtype = DType::bf16;
  int head_dim_qk = 128;
  int head_dim_v = 128;
  std::string mask = "none";
  std::string score = "score";
  std::vector<ParamDecl> params;
  std::vector<TensorDecl> tensors;
  TuneSpace tune;

  // Parses a YAML spec; throws Error(spec) listing every problem as file:line:col with a caret.
  static AttentionSpec from_yaml(std::string_view text, std::string_view filename = "<spec>");
  // Throws Error(spec) when the spec is malformed or asks for something flashjit cannot build.
  void validate() const;
  // Deterministic YAML text (keys in a fixed order, expressions printed canonically): the
  // same for a spec built in C++ and its YAML; caches hash it.
  std::string canonical() const;
};

// The built-in default of `flashjit run` with no SPEC: bf16, d=128, causal.
FLASHJIT_API AttentionSpec default_spec();

// What flashjit derives from a spec before it generates code (a compile dump's `analyze` stage).
struct SpecAnalysis {
  std::string canonical;  // canonical YAML, as AttentionSpec::canonical()
  std::string text;       // desugared mask and score, d score'/d score, tile ranges both ways, block map
  std::string json;       // the spec and its analyses as one JSON object
};
// Error(spec) lists every problem as file:line:col with a caret.
FLASHJIT_API SpecAnalysis analyze(const AttentionSpec& spec);

// One mask or score expression, checked against declared params and tensors.
struct ExpressionAnalysis {
  std::string canonical;   // printed canonically
  std::string kind;        // "mask" | "score"
  std::string type;        // "bool" | "i32" | "f32"
  std::string score_grad;  // scores: d/dscore, simplified ("" for masks)
  bool affine = false;     // masks: the closed-form tile ranges are exact (no block map)
  std::string kv_range;    // masks: keys per query tile ("" for scores)
  std::string q_range;     // masks: queries per key tile
  std::string json;        // all of the above as one JSON object
};
// `kind` "" means score when the expression reads `score`, else mask. Error(spec) lists every
// problem as <expr>:1:col with a caret (the declarations' own problems as <spec> ones).
FLASHJIT_API ExpressionAnalysis analyze_expression(const std::string& expr, const std::string& kind,
                                                   const std::vector<ParamDecl>& params,
                                                   const std::vector<TensorDecl>& tensors);

// ---- compilation (no GPU needed) ----------------------------------------------------------------

struct FLASHJIT_API TileConfig {
  int block_m = 64;
  int block_n = 64;
  int num_warps = 4;
  int num_stages = 1;
  std::string str() const;  // "bm64_bn64_w4_s1"
};

struct CompileOptions {
  // sm_80 | sm_86 | sm_89 | sm_90 | sm_90a. Empty: sm_90a for compile_to_ptx, the device's own
  // arch for Runtime::compile (which rejects an arch that differs from its device's).
  std::string arch;
  std::optional<TileConfig> config;      // empty: the heuristic table picks one
  // Tensor-core instruction: "auto" (wgmma on sm_90a where the tile config allows, else mma.sync)
  // or "sync" (mma.sync everywhere). Empty: FLASHJIT_MMA.
  std::optional<std::string> mma;
  std::optional<std::string> dump_dir;       // empty: FLASHJIT_DUMP_DIR
  std::optional<std::string> override_dir;   // empty: FLASHJIT_OVERRIDE_DIR
  // Print the optimised IR into CompiledKernel::llvm_ir (and the IR stages' text). Empty: yes for
  // compile_to_ptx, no for Runtime::compile, whose kernels skip it (~5% of a cold compile).
  // A dump directory always gets every stage.
  std::optional<bool> keep_llvm_ir;
  // The backward pass (Kernel::backward). compile_to_ptx: emit the backward module (dK/dV, dQ and
  // the D pre-pass kernels) instead of the forward. Runtime::compile: compile and load it now, so
  // its errors surface here; without it, the first Kernel::backward compiles it (set it when that
  // first call would be inside a CUDA graph capture: a capture should record launches, not a
  // compile and a module load).
  bool backward = false;
  std::optional<TileConfig> backward_config;  // empty: the backward's heuristic table
  // Autotuning (Runtime::compile; docs/autotune.md). Without `config`, Kernel::forward picks a tile
  // config per shape bucket: a stored tuning, else (mode quick|full) one tuned on first use.
  std::optional<std::string> autotune;     // "off" | "quick" | "full"; empty: FLASHJIT_AUTOTUNE
  bool tune_on_first_use = true;           // false: use stored tunings only, never tune inside forward()
  std::optional<double> tune_deadline_s;   // per bucket: stop timing after this, the best so far wins
  // A tiered compile (Kernel::wait_full). "on": where the compile cache does not hold the kernel
  // and it has a quick form, Runtime::compile loads the quick form and compiles the full kernel in
  // the background; "off": Runtime::compile returns the full kernel; "quick": the quick form only,
  // never the full kernel (compile_to_ptx too). Empty: FLASHJIT_TIERED.
  std::optional<std::string> tiered;
};

// One stage's output, as written to FLASHJIT_DUMP_DIR.
struct StageRecord {
  std::string name;  // "spec", "analyze", "plan", "llvm-ir", "opt", "ptx"
  double ms = 0;
  std::string text;  // empty for the IR stages when the IR is not kept (CompileOptions::keep_llvm_ir)
};

struct CompiledKernel {
  std::string key;          // content hash naming this kernel (dump folder, later caches)
  std::string entry;        // PTX entry point name
  std::string description;  // template, dtype, dims, mask and tile config, for logs and the CLI
  // Masks without an exact closed form get a block-map pre-pass kernel (same PTX module).
  std::string map_entry;    // empty when there is none
  bool map_per_batch = false, map_per_head = false;
  // Split-KV forms (decode) also hold the kernel that combines the splits' partial outputs.
  std::string combine_entry;  // empty when there is none
  std::string arch;
  TileConfig config;
  std::string config_reason;  // why this tile config (heuristic row or "given")
  int threads = 0;          // per CTA
  int shared_bytes = 0;     // dynamic shared memory per CTA
  // Persistent CTAs: the kernel walks its (query tile, head, batch) tiles from any grid, and the
  // runtime launches one CTA per SM (FLASHJIT_PERSISTENT=auto) instead of one per tile.
  bool persistent = false;
  // How many tensor maps the kernel takes: 0, 3 when it loads Q, K and V with the TMA unit, 4 when
  // it also stores O with it. The runtime encodes them per launch from the tensors' addresses,
  // sizes and strides (FLASHJIT_TMA).
  int tensor_maps = 0;
  std::string llvm_ir;      // optimised module (empty unless CompileOptions::keep_llvm_ir)
  std::string ptx;
  std::vector<StageRecord> stages;
};

FLASHJIT_API CompiledKernel compile_to_ptx(const AttentionSpec& spec, const CompileOptions& options = {});

// ---- tensors and launches -----------------------------------------------------------------------

// A device tensor viewed as [batch, seq, heads, dim]; strides in elements, dim must be contiguous.
struct Tensor {
  void* data = nullptr;
  int64_t stride[4] = {0, 0, 0, 1};
};

// A value for one of the spec's params; params not given take their default.
struct ParamValue {
  std::string name;
  double value = 0;
};

// Device memory for one of the spec's tensors: `numel` elements of its declared type.
struct BufferArg {
  std::string name;
  const void* data = nullptr;
  int64_t numel = 0;
};

class BlockMap;
namespace detail {
struct Access;  // the runtime's way to build and read its handles; not part of the API
}  // namespace detail

// The sizes of one attention problem. heads_q is a multiple of heads_kv (GQA/MQA).
struct ProblemShape {
  int64_t batch = 1, seq_q = 0, seq_kv = 0, heads_q = 1, heads_kv = 1;
};

struct ForwardArgs : ProblemShape {
  Tensor q, k, v, o;
  float* lse = nullptr;     // [batch, heads_q, seq_q] fp32, natural log; may be null
  float scale = 0.f;        // 0 → 1/sqrt(d_qk)
  std::vector<ParamValue> params;
  std::vector<BufferArg> buffers;  // one per spec tensor, all required
  // For masks with a block map (CompiledKernel::map_entry): a map built by
  // Kernel::build_block_map for these sizes, params and tensor contents, reused across calls.
  // Null: the map is rebuilt on the stream before every launch.
  const BlockMap* block_map = nullptr;
  void* stream = nullptr;   // CUstream; null = the legacy default stream
  // Split-KV (Flash-Decoding): when the query side leaves SMs idle (decode: seq_q of 1–16), each
  // row's key tiles are split across this many CTAs, each writing a partial O and LSE (fp32,
  // stream-ordered workspace), and a combine kernel merges them; the result is the unsplit one up
  // to rounding. 0: automatic, from the SM count, the kernel's occupancy and the key tiles
  // (FlashAttention-2's rule); 1: never split; 2..128: exactly this many.
  int num_splits = 0;
  // Varlen (packed sequences, FlashAttention's varlen API): `batch` sequences of different lengths
  // packed along q/o's and k/v's seq dimension, no padding. Sequence b is tokens
  // [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q and o and [cu_seqlens_kv[b], cu_seqlens_kv[b + 1])
  // of k and v: int32 device arrays of batch + 1 non-decreasing offsets from 0. seq_q and seq_kv are
  // then the total tokens (the tensors' lengths), stride[0] is not used, max_seqlen_q/kv bound the
  // longest sequence (they size the grid) and lse is [heads_q, seq_q]. The DSL's q, kv, seq_q and
  // seq_kv are positions and lengths within each sequence. Both null: every sequence is seq_q ×
  // seq_kv. Masks that need a block map, and spec tensors sized by seq_q or seq_kv, are refused.
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_kv = nullptr;
  int64_t max_seqlen_q = 0, max_seqlen_kv = 0;
  // Paged K/V cache (vLLM's layout): k and v are page pools [num_pages, page_size, heads_kv, dim]
  // whose stride[0] is the page stride; key n of sequence b is row n % page_size of page
  // block_table[b · max_pages_per_seq + n / page_size] (int32, device, [batch, max_pages_per_seq]).
  // page_size: any positive multiple of 16. seq_kv: the most keys a sequence has (at most
  // max_pages_per_seq · page_size); seqused_kv (int32, device, [batch], optional): each sequence's
  // key count. Masks see each sequence's own seq_kv, so causal_br is its decode alignment. With
  // varlen (packed queries against a paged cache, FlashAttention's flash_attn_varlen_func with a
  // block table): q and o are packed by cu_seqlens_q; sequence b has cu_seqlens_kv[b + 1] −
  // cu_seqlens_kv[b] keys (seqused_kv[b] when given), all in its pages; seq_kv is then the most
  // keys a sequence has, as without varlen. The table's page ids are not checked on the host
  // (they live on the device).
  const int32_t* block_table = nullptr;
  int64_t page_size = 0, max_pages_per_seq = 0;
  const int32_t* seqused_kv = nullptr;
};

// The gradients of a forward call (FlashAttention-2's backward: P recomputed from the forward's
// LSE, never stored). Sizes, q, k, v, scale, params and buffers as given to the forward.
struct BackwardArgs : ProblemShape {
  Tensor q, k, v;
  Tensor o;                 // the forward's output
  Tensor d_o;               // dL/dO, shaped like o
  Tensor dq, dk, dv;        // written: dL/dQ, dL/dK, dL/dV, shaped like q, k, v (GQA: summed over the group)
  const float* lse = nullptr;  // required: the forward's [batch, heads_q, seq_q] fp32 LSE
  float scale = 0.f;        // 0 → 1/sqrt(d_qk); must be the forward's
  std::vector<ParamValue> params;
  std::vector<BufferArg> buffers;  // one per spec tensor, all required
  // Bitwise-identical dQ, dK, dV from run to run. Where the kernel's plan sums dQ inside the dK/dV
  // kernel (sm_90a with wgmma, 64-query tiles, d_qk 128, or d_qk 64 with a producer warpgroup;
  // `CompiledKernel::description` says "dQ fused"), those fp32 additions land in no fixed order, so dQ may differ in
  // its last bits between runs; `deterministic` then runs a dQ kernel of its own instead, where each element is summed
  // by one thread in a fixed order: 5–8% slower at 16k tokens, within ±3% at 1k–4k (docs/perf-notes.md §10). Every
  // other plan is deterministic either way. dK and dV are deterministic always.
  bool deterministic = false;
  void* stream = nullptr;   // CUstream; workspace (fp32 D) is allocated and freed on it
  // For masks with a block map: the backward's maps (query tiles per key tile, and key tiles per
  // query tile for the dQ kernel) built by Kernel::build_backward_block_map for these sizes,
  // params and tensor contents, reused across calls, as FlexAttention's BlockMask is built once
  // and shared by every layer's forward and backward. Null: map pre-passes rebuild them on the
  // stream before every call.
  const BlockMap* block_map = nullptr;
};

// Contiguous BSHD strides for [batch, seq, heads, dim].
FLASHJIT_API Tensor bshd(void* data, int64_t seq, int64_t heads, int64_t dim);

// ---- runtime ------------------------------------------------------------------------------------

struct FLASHJIT_API DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int shared_per_block = 0;        // default limit
  int shared_per_block_optin = 0;  // with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
  int shared_per_sm = 0;
  int l2_bytes = 0;
  int driver_version = 0;          // e.g. 13000
  // Who assembles this device's PTX (FLASHJIT_PTXAS): "ptxas 13.0.88" or "driver" (its JIT).
  std::string assembler;
  std::string arch() const;        // the PTX target flashjit uses for it, e.g. "sm_90a"
};

class Runtime;

// The tile lists of a mask that reads tensors, on the device: per query tile its key tiles
// (Kernel::build_block_map, for forward calls), or both directions at the backward's tile sizes
// (Kernel::build_backward_block_map, for backward calls). Valid for the kernel, sizes and params
// it was built for, and the tensor contents it read: rebuild it when the tensors change.
class FLASHJIT_API BlockMap {
 public:
  struct Impl;
  const Impl* impl() const { return impl_.get(); }

 private:
  friend class Kernel;
  std::shared_ptr<Impl> impl_;
};

// A compiled, loaded kernel, launchable from several threads at once. Its spec and results never
// change; after a tiered compile its launches move from the quick form to the full kernel once
// that has loaded (wait_full). A default-constructed Kernel is empty: its methods throw Error(usage).
class FLASHJIT_API Kernel {
 public:
  const AttentionSpec& spec() const;
  // The spec's canonical YAML (name included), as it was parsed and checked once at compile time.
  const std::string& canonical_spec() const;
  // The kernel that launches of the base config run: after a tiered compile (FLASHJIT_TIERED), its
  // quick form until the full kernel has loaded, then the full one (its description says "+quick"
  // while the quick form serves).
  const CompiledKernel& compiled() const;
  int registers() const;      // per thread, from the driver
  int spill_bytes() const;    // local memory per thread, from the driver
  // Runtime::compile of a spec whose kernel the compile cache does not hold may return with the
  // kernel's quick form loaded (FLASHJIT_TIERED=on, the default) while the full kernel compiles on
  // a background thread; launches take the full one from the first after it has loaded. Both give
  // the same output and LSE bit for bit; the quick form runs 1-10% slower. Blocks until the full
  // kernel has loaded or its compile failed (a warning says why; the quick form then stays).
  // Returns at once when there was no tiered compile. Call it before timing the kernel.
  void wait_full() const;
  // Checks shapes, strides and alignment (Error(usage) naming the argument), then launches.
  void forward(const ForwardArgs& args) const;
  // What forward(args) would launch, as FLASHJIT_LOG=info logs each launch: kernel key, grid,
  // block, shared memory, tile config and why (tuned, heuristic, decode heuristic or given), the
  // split-KV count, GQA packing, block map. Checks args as forward() does and decides the shape's
  // bucket as forward() does (a tuning on first use may run); launches nothing.
  std::string describe_launch(const ForwardArgs& args) const;
  // Runs the block-map pre-pass for these sizes/params/tensors on args.stream. Error(usage)
  // when the kernel has no block map (its mask has an exact closed form).
  BlockMap build_block_map(const ForwardArgs& args) const;
  // dQ, dK, dV for a forward call's inputs, output, LSE and dO. Checks as forward() does (Error(usage)
  // naming the argument). The config per shape bucket is chosen as forward()'s is: always
  // CompileOptions::backward_config when given; with autotune off the backward's heuristic for the
  // shape (the table's, or at d <= 64 on walks of 4096 query rows or more per key tile, except for
  // deterministic calls, the kernel with a producer warpgroup that also adds dQ); else
  // the bucket's stored backward tuning (`flashjit tune --backward`), or one tuned on the bucket's
  // first call (FLASHJIT_AUTOTUNE=quick|full, tune_on_first_use), else the heuristic. Each
  // config's module is compiled and loaded on first use (the base one eagerly with
  // CompileOptions::backward).
  void backward(const BackwardArgs& args) const;
  // Runs the backward's block-map pre-passes for these sizes/params/tensors on args.stream (the
  // config is chosen as backward(args) chooses it, so a tuning on first use may run), for later
  // backward calls with the same sizes, params and tensor contents. Error(usage) when the mask has
  // an exact closed form (no map), or when args.block_map is set.
  BlockMap build_backward_block_map(const BackwardArgs& args) const;
  // The base backward module: CompileOptions::backward_config's or the heuristic's (compiled now
  // if it was not yet).
  const CompiledKernel& backward_compiled() const;
  // The backward module that calls of `shape`'s bucket run, deciding the bucket now as its first
  // call would (a tuning on first use then runs on random tensors of the spec's shapes).
  // `deterministic`: of the calls with BackwardArgs::deterministic (untuned, they can take another).
  const CompiledKernel& backward_compiled(const ProblemShape& shape, bool deterministic = false) const;

 private:
  friend class Runtime;
  friend struct detail::Access;
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// Device memory owned by flashjit, for the CLI, tests and small embedders. Move-only.
class FLASHJIT_API DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&&) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&&) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return ptr_; }
  size_t size() const { return bytes_; }
  void upload(const void* host, size_t bytes);
  void download(void* host, size_t bytes) const;
  void fill_bytes(unsigned char value);  // e.g. 0xFF poisons with NaN (fp16/bf16/fp32)

 private:
  friend class Runtime;
  friend class Kernel;
  std::shared_ptr<void> ctx_;  // keeps the runtime's context alive
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// One per device. Uses the caller's current CUDA context if there is one, else the device's
// primary context; never creates hidden contexts. Thread-safe.
class FLASHJIT_API Runtime {
 public:
  // Throws Error(no_gpu) when libcuda.so.1 cannot be loaded or no device exists.
  static Runtime create(int device = 0);
  const DeviceInfo& device() const;
  // spec → PTX (LLVM) → cubin (driver JIT) → loaded module.
  Kernel compile(const AttentionSpec& spec, const CompileOptions& options = {}) const;
  DeviceBuffer alloc(size_t bytes) const;
  void synchronize() const;
  // Median milliseconds of `reps` launches after `warmup`, timed with CUDA events per launch, of
  // the full kernel (it calls Kernel::wait_full first).
  double time_forward(const Kernel& kernel, const ForwardArgs& args, int warmup = 3, int reps = 20) const;
  // The same for Kernel::backward (its D pre-pass, workspace and kernels; not the forward).
  double time_backward(const Kernel& kernel, const BackwardArgs& args, int warmup = 3, int reps = 20) const;

 private:
  friend struct detail::Access;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// ---- versions and knobs -------------------------------------------------------------------------

struct VersionInfo {
  std::string flashjit;
  std::string llvm;
  std::string ptx_isa;   // the PTX ISA version emitted for sm_90a, e.g. "8.0"
};
FLASHJIT_API VersionInfo versions();

// Every FLASHJIT_* environment variable, typed and documented (one registry).
struct KnobInfo {
  std::string name;
  std::string type;    // "string" | "enum" | "path" | "size"
  std::string default_value;
  std::string value;   // as read at first use
  std::string doc;
};
// Throws Error(usage) naming a knob whose value is not one it allows (FLASHJIT_LOG=banana).
FLASHJIT_API std::vector<KnobInfo> knobs();

// Where the on-disk caches live: $FLASHJIT_CACHE_DIR, else $XDG_CACHE_HOME/flashjit, else
// $HOME/.cache/flashjit, else the passwd entry's home + /.cache/flashjit; XDG_CACHE_HOME and HOME
// count only when absolute. Throws Error(usage) when none of them gives an absolute folder.
FLASHJIT_API std::string cache_dir();

}  // namespace flashjit

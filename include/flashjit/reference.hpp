// CPU reference attention (fp64) and the same-dtype "straightforward" implementation it is judged by.
#pragma once

#include <cstdint>
#include <vector>

#include "flashjit/flashjit.hpp"

namespace flashjit::ref {

// fp16/bf16 storage as raw 16-bit patterns; conversions round to nearest even.
FLASHJIT_API uint16_t to_half_bits(float x, DType dtype);
FLASHJIT_API float from_half_bits(uint16_t bits, DType dtype);
FLASHJIT_API float round_to(float x, DType dtype);

// A spec tensor's contents on the host (row-major, as declared): i32 or f32 by its type.
struct HostTensor {
  std::string name;
  std::vector<int32_t> i32;
  std::vector<float> f32;
};

// Host tensors in BSHD layout, contiguous: [batch, seq, heads, dim].
struct Problem : ProblemShape {
  AttentionSpec spec;         // dtype, head dims, mask, score, params, tensors
  float scale = 0.f;          // 0 → 1/sqrt(d_qk)
  std::vector<uint16_t> q, k, v;
  std::vector<ParamValue> params;    // as passed at launch; the rest take their defaults
  std::vector<HostTensor> tensors;   // one per spec tensor
  float effective_scale() const;
  DType dtype() const { return spec.dtype; }
  int64_t d_qk() const { return spec.head_dim_qk; }
  int64_t d_v() const { return spec.head_dim_v; }
};

// Fills p.tensors for every spec tensor: i32 → non-decreasing segment ids along the last dim
// (8 segments of random lengths, like packed documents); f32 → uniform [0, 1) (e.g. ALiBi slopes).
FLASHJIT_API void fill_spec_tensors(Problem& p, uint64_t seed);

// The fraction of (q, kv) pairs the mask leaves visible (for useful FLOPs): exact up to 2^22
// pairs, else counted on evenly spaced rows; at b = h = 0.
FLASHJIT_API double visible_fraction(const Problem& p);

struct Rows {
  // Output rows, [n_rows, d_v], as double, and their natural-log LSE (-inf for fully masked rows).
  std::vector<double> o;
  std::vector<double> lse;
};

// The (batch, head, query) rows to check; all rows when small, a spread sample when large.
struct RowId { int64_t b, h, q; };
FLASHJIT_API std::vector<RowId> pick_rows(const Problem& p, int64_t max_rows);

// fp64 softmax(score(scale·QKᵀ) masked)V for the given rows, the mask and score evaluated by the
// DSL interpreter (the reference semantics). Fully masked rows give O = 0 and LSE = -inf.
FLASHJIT_API Rows attention_fp64(const Problem& p, const std::vector<RowId>& rows);

// What a plain same-dtype implementation computes: S = QKᵀ (fp32 accumulation) rounded to dtype,
// scaled and score-modified in dtype, softmax in fp32, P rounded to dtype, O = PV (fp32
// accumulation) rounded to dtype. Its error
// against fp64 is the yardstick of the FlashAttention numerics rule (docs/architecture.md).
FLASHJIT_API Rows attention_same_dtype(const Problem& p, const std::vector<RowId>& rows);

// The numerics verdict for one output tensor (BSHD, dtype bits) against the references.
struct Verdict {
  bool ok = false;
  double max_err = 0;          // kernel vs fp64
  double baseline_err = 0;     // same-dtype straightforward vs fp64
  double floor = 0;            // representation error of the fp64 result in dtype
  double limit = 0;            // 2·baseline + floor
  double max_lse_err = 0;      // kernel LSE vs fp64 (when LSE was given)
  int64_t nan_count = 0;       // over the WHOLE output, not only the checked rows
  int64_t rows_checked = 0;
  int64_t lse_rows_checked = 0;
  std::string message;         // one line, for logs
};

// What a kernel's output is judged against: the fp64 and same-dtype rows of pick_rows(p, max_rows)
// and the fp64 LSE of every row when batch·heads_q·seq_q·seq_kv ≤ kAllLseRowsPairs (else of the
// output's rows). A non-finite value in the fp64 reference is never an element to skip: it fails
// the verdict unless the kernel's output has the same value there (and a NaN output fails anyway).
constexpr int64_t kAllLseRowsPairs = int64_t(1) << 24;
struct Expected {
  std::vector<RowId> rows;
  Rows truth, plain;
  std::vector<RowId> lse_rows;
  std::vector<double> lse;  // fp64 LSE of lse_rows
};
FLASHJIT_API Expected expect(const Problem& p, int64_t max_rows = 2048);
// The same on the given rows only, LSE included (for a caller that bounds the reference's cost).
FLASHJIT_API Expected expect_rows(const Problem& p, std::vector<RowId> rows);

// The FlashAttention rule for one output (BSHD, dtype bits) and optional LSE ([batch, heads_q,
// seq_q]): on the expected rows, max error against fp64 ≤ 2 × the same-dtype error + a floor;
// no NaN or infinity anywhere in the output; LSE within 1e-3 of fp64 on lse_rows, and −inf
// exactly where a row has no visible key. Usable many times against one expect() (the tuner).
FLASHJIT_API Verdict judge(const Problem& p, const Expected& e, const std::vector<uint16_t>& out_bshd,
                           const std::vector<float>* lse_bhs);
// judge(p, expect(p, max_rows), out_bshd, lse_bhs).
FLASHJIT_API Verdict verify(const Problem& p, const std::vector<uint16_t>& out_bshd,
                            const std::vector<float>* lse_bhs, int64_t max_rows = 2048);

// Packed sequences (varlen, ForwardArgs::cu_seqlens_*): sequence b alone is a batch-1 problem of
// seq_q[b] query and seq_kv[b] key tokens with N(0,1) inputs (drawn in sequence order: q, k, v of
// sequence 0, then of 1, ...); packed, their tokens follow each other with no padding.
struct PackedSequences {
  std::vector<Problem> seqs;
  std::vector<uint16_t> q, k, v;     // the packed tokens: [total, heads, d], dtype bits
  std::vector<int32_t> cu_q, cu_kv;  // batch + 1 token offsets
};
// Error(usage) when the tokens of either side exceed 2^31 - 1.
FLASHJIT_API PackedSequences pack_sequences(const AttentionSpec& spec, const std::vector<int64_t>& seq_q,
                                            const std::vector<int64_t>& seq_kv, int64_t heads_q, int64_t heads_kv,
                                            const std::vector<ParamValue>& params, uint64_t seed);
// verify() of each sequence's rows of a packed output (BSHD over the total tokens, dtype bits) and
// LSE ([heads_q, total query tokens]): the first failing sequence's verdict, its message prefixed
// with "FAIL sequence b (seq_q x seq_kv): "; else ok with message "PASS".
FLASHJIT_API Verdict verify_packed(const PackedSequences& p, const std::vector<uint16_t>& out,
                                   const std::vector<float>& lse);

// ---- backward ------------------------------------------------------------------------------------

// Gradients in BSHD layout like q/k/v: dq [batch, seq_q, heads_q, d_qk], dk [batch, seq_kv, heads_kv,
// d_qk], dv [batch, seq_kv, heads_kv, d_v]. For GQA/MQA, dk/dv of a KV head sum over its query heads.
struct Grads {
  std::vector<double> dq, dk, dv;
};

// fp64 backward of O = softmax(f(scale·QKᵀ) masked)·V, f the spec's score modifier, for the
// upstream gradient d_o ([batch, seq_q, heads_q, d_v], dtype bits), every row (FlashAttention-2,
// Dao 2023, Algorithm 2): P recomputed, D = rowsum(dO∘O) = Σⱼ P∘dP, dS = P∘(dP − D)∘f'(scale·s)
// with f' the spec's d score'/d score, dQ = scale·dS·K, dK = scale·dSᵀ·Q, dV = Pᵀ·dO. Mask, f and
// f' go through the DSL interpreter, f and f' in f32 as f is in attention_fp64. Fully masked rows
// give zero gradients (never NaN). Throws Error(usage) when a tensor's size does not match the shape.
FLASHJIT_API Grads attention_backward_fp64(const Problem& p, const std::vector<uint16_t>& d_o);

// What a plain same-dtype (PyTorch autograd) implementation computes, as attention_same_dtype does
// for the forward: every matmul accumulates in fp32 and is rounded to dtype (S, dP, dQ, dK, dV,
// and dK, dV per query head before the GQA sum, rounded again); S·scale and the score modifier
// rounded to dtype; softmax in fp32, P rounded; the softmax backward P∘(dP − Σ P∘dP) in fp32,
// rounded; its product with d score'/d score rounded, and with scale rounded. Its error against
// fp64 is the yardstick of verify_backward.
FLASHJIT_API Grads attention_backward_same_dtype(const Problem& p, const std::vector<uint16_t>& d_o);

// The numerics verdict of a kernel's dq, dk, dv (dtype bits, BSHD) under verify()'s rule, each
// tensor on its own: max error against fp64 within 2 × the same-dtype error + floor, no NaN or
// infinity anywhere in the tensor; every row is checked (max_lse_err stays 0). A tensor of the
// wrong size fails with a message.
struct BackwardVerdict {
  bool ok = false;
  Verdict dq, dk, dv;
  std::string message;  // one line, for logs
};
FLASHJIT_API BackwardVerdict verify_backward(const Problem& p, const std::vector<uint16_t>& d_o,
                                             const std::vector<uint16_t>& dq, const std::vector<uint16_t>& dk,
                                             const std::vector<uint16_t>& dv);

}  // namespace flashjit::ref

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

// Host tensors in BSHD layout, contiguous: [batch, seq, heads, dim].
struct Problem {
  DType dtype = DType::bf16;
  std::string mask = "none";  // "none" | "causal" (top-left: q >= kv)
  int64_t batch = 1, seq_q = 0, seq_kv = 0, heads_q = 1, heads_kv = 1, d_qk = 0, d_v = 0;
  float scale = 0.f;          // 0 → 1/sqrt(d_qk)
  std::vector<uint16_t> q, k, v;
  float effective_scale() const;
};

struct Rows {
  // Output rows, [n_rows, d_v], as double, and their natural-log LSE (-inf for fully masked rows).
  std::vector<double> o;
  std::vector<double> lse;
};

// The (batch, head, query) rows to check; all rows when small, a spread sample when large.
struct RowId { int64_t b, h, q; };
FLASHJIT_API std::vector<RowId> pick_rows(const Problem& p, int64_t max_rows);

// fp64 softmax(scale·QKᵀ)V for the given rows. Fully masked rows give O = 0 and LSE = -inf.
FLASHJIT_API Rows attention_fp64(const Problem& p, const std::vector<RowId>& rows);

// What a plain same-dtype implementation computes: S = QKᵀ (fp32 accumulation) rounded to dtype,
// softmax in fp32, P rounded to dtype, O = PV (fp32 accumulation) rounded to dtype. Its error
// against fp64 is the yardstick of the FlashAttention numerics rule (DESIGN §8).
FLASHJIT_API Rows attention_same_dtype(const Problem& p, const std::vector<RowId>& rows);

// The DESIGN §8 verdict for one output tensor (BSHD, dtype bits) against the references.
struct Verdict {
  bool ok = false;
  double max_err = 0;          // kernel vs fp64
  double baseline_err = 0;     // same-dtype straightforward vs fp64
  double floor = 0;            // representation error of the fp64 result in dtype
  double limit = 0;            // 2·baseline + floor
  double max_lse_err = 0;      // kernel LSE vs fp64 (when LSE was given)
  int64_t nan_count = 0;       // over the WHOLE output, not only the checked rows
  int64_t rows_checked = 0;
  std::string message;         // one line, for logs
};
FLASHJIT_API Verdict verify(const Problem& p, const std::vector<uint16_t>& out_bshd,
                            const std::vector<float>* lse_bhs, int64_t max_rows = 2048);

}  // namespace flashjit::ref

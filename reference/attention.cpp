// CPU reference attention: fp64 "truth" and the same-dtype straightforward implementation whose
// error sets the bar (FlashAttention's test rule: kernel error ≤ 2 × that error + a floor).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "compiler/spec_bridge.hpp"
#include "flashjit/reference.hpp"
#include "reference/semantics.hpp"

namespace flashjit::ref {

uint16_t to_half_bits(float x, DType dtype) {
  if (dtype == DType::bf16) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if (std::isnan(x)) return 0x7FC0;
    u += 0x7FFF + ((u >> 16) & 1);  // round to nearest even
    return static_cast<uint16_t>(u >> 16);
  }
  return static_cast<uint16_t>(std::bit_cast<uint16_t>(static_cast<_Float16>(x)));
}

float from_half_bits(uint16_t bits, DType dtype) {
  if (dtype == DType::bf16) {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  return static_cast<float>(std::bit_cast<_Float16>(bits));
}

float round_to(float x, DType dtype) { return from_half_bits(to_half_bits(x, dtype), dtype); }

float Problem::effective_scale() const { return scale != 0.f ? scale : 1.f / std::sqrt(static_cast<float>(d_qk())); }


using detail::parallel_for;
using detail::Semantics;
using detail::k_index;
using detail::q_index;
using detail::v_index;

std::vector<RowId> pick_rows(const Problem& p, int64_t max_rows) {
  std::vector<RowId> rows;
  const int64_t total = p.batch * p.heads_q * p.seq_q;
  if (total <= max_rows) {
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < p.heads_q; ++h)
        for (int64_t q = 0; q < p.seq_q; ++q) rows.push_back({b, h, q});
    return rows;
  }
  // Per (batch, head): the first and last 16 rows (tile edges, ragged tail) and an even spread.
  const int64_t per_bh = std::max<int64_t>(48, max_rows / std::max<int64_t>(1, p.batch * p.heads_q));
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads_q; ++h) {
      std::vector<int64_t> qs;
      for (int64_t q = 0; q < std::min<int64_t>(16, p.seq_q); ++q) qs.push_back(q);
      for (int64_t q = std::max<int64_t>(0, p.seq_q - 16); q < p.seq_q; ++q) qs.push_back(q);
      const int64_t spread = std::max<int64_t>(1, per_bh - 32);
      for (int64_t i = 0; i < spread; ++i) qs.push_back((i * 7919 + 13) % p.seq_q);
      std::sort(qs.begin(), qs.end());
      qs.erase(std::unique(qs.begin(), qs.end()), qs.end());
      for (int64_t q : qs) rows.push_back({b, h, q});
    }
  return rows;
}

namespace {

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

// The reference loop both implementations share: for each checked row, its scores (−inf where
// masked) from `score_of(dot, kv)` over T-precision dot products, then `finish(r, id, hk, s, m)`
// for rows with a visible key (a fully masked row stays O = 0, LSE = −inf).
template <class T, class ScoreFn, class FinishFn>
Rows attention_rows(const Problem& p, const std::vector<RowId>& ids, ScoreFn score_of, FinishFn finish,
                    bool with_o = true) {
  const Semantics sem(p);
  const DType dt = p.dtype();
  Rows out;
  if (with_o) out.o.assign(ids.size() * p.d_v(), 0.0);
  out.lse.assign(ids.size(), kNegInf<double>);
  const int64_t group = p.heads_q / p.heads_kv;
  parallel_for(ids.size(), [&](size_t r) {
    const RowId id = ids[r];
    const int64_t hk = id.h / group;
    std::vector<T> s(p.seq_kv, kNegInf<T>);
    T m = kNegInf<T>;
    for (int64_t kv = 0; kv < p.seq_kv; ++kv) {
      if (!sem.visible(id.b, id.h, id.q, kv)) continue;
      T dot = 0;
      const size_t qi = q_index(p, id.b, id.q, id.h), ki = k_index(p, id.b, kv, hk);
      for (int64_t c = 0; c < p.d_qk(); ++c) dot += T(from_half_bits(p.q[qi + c], dt)) * T(from_half_bits(p.k[ki + c], dt));
      s[kv] = score_of(sem, id, kv, dot);
      // A NaN score (a NaN input or modifier) makes the row NaN; std::max would drop it, and a
      // row of NaN scores would pass for one with no visible key.
      if (s[kv] > m || std::isnan(s[kv])) m = std::isnan(m) ? m : s[kv];
    }
    if (m != kNegInf<T>) finish(out, r, hk, s, m);
  });
  return out;
}

}  // namespace

Rows attention_fp64(const Problem& p, const std::vector<RowId>& ids) {
  const double scale = p.effective_scale();
  const bool identity = p.spec.score == "score";
  const int64_t d_v = p.d_v();
  auto score = [&](const Semantics& sem, const RowId& id, int64_t kv, double dot) {
    // The score modifier is f32 in the language; the identity keeps full fp64 precision.
    return identity ? dot * scale : double(sem.score(id.b, id.h, id.q, kv, float(dot * scale)));
  };
  auto finish = [&](Rows& out, size_t r, int64_t hk, const std::vector<double>& s, double m) {
    const RowId id = ids[r];
    double l = 0;
    double* o = &out.o[r * d_v];
    for (int64_t kv = 0; kv < p.seq_kv; ++kv) {
      if (s[kv] == kNegInf<double>) continue;
      double w = std::exp(s[kv] - m);
      l += w;
      const size_t vi = v_index(p, id.b, kv, hk);
      for (int64_t c = 0; c < d_v; ++c) o[c] += w * double(from_half_bits(p.v[vi + c], p.dtype()));
    }
    for (int64_t c = 0; c < d_v; ++c) o[c] /= l;
    out.lse[r] = m + std::log(l);
  };
  return attention_rows<double>(p, ids, score, finish);
}

Rows attention_same_dtype(const Problem& p, const std::vector<RowId>& ids) {
  const float scale = p.effective_scale();
  const bool identity = p.spec.score == "score";
  const DType dt = p.dtype();
  const int64_t d_v = p.d_v();
  auto score = [&](const Semantics& sem, const RowId& id, int64_t kv, float dot) {
    float x = round_to(round_to(dot, dt) * scale, dt);  // S = QKᵀ in dtype, then scaled in dtype
    return identity ? x : round_to(sem.score(id.b, id.h, id.q, kv, x), dt);
  };
  auto finish = [&](Rows& out, size_t r, int64_t hk, const std::vector<float>& s, float m) {
    const RowId id = ids[r];
    float l = 0;
    for (int64_t kv = 0; kv < p.seq_kv; ++kv)
      if (s[kv] != kNegInf<float>) l += std::exp(s[kv] - m);
    std::vector<float> acc(d_v, 0.f);
    for (int64_t kv = 0; kv < p.seq_kv; ++kv) {
      if (s[kv] == kNegInf<float>) continue;
      const float prob = round_to(std::exp(s[kv] - m) / l, dt);  // softmax output in dtype
      const size_t vi = v_index(p, id.b, kv, hk);
      for (int64_t c = 0; c < d_v; ++c) acc[c] += prob * from_half_bits(p.v[vi + c], dt);
    }
    for (int64_t c = 0; c < d_v; ++c) out.o[r * d_v + c] = round_to(acc[c], dt);
    out.lse[r] = m + std::log(l);
  };
  return attention_rows<float>(p, ids, score, finish);
}

namespace {

// fp64 LSE only (no PV): the all-rows LSE check costs the QKᵀ half of the reference.
std::vector<double> lse_fp64(const Problem& p, const std::vector<RowId>& ids) {
  const double scale = p.effective_scale();
  const bool identity = p.spec.score == "score";
  auto score = [&](const Semantics& sem, const RowId& id, int64_t kv, double dot) {
    return identity ? dot * scale : double(sem.score(id.b, id.h, id.q, kv, float(dot * scale)));
  };
  auto finish = [&](Rows& out, size_t r, int64_t, const std::vector<double>& s, double m) {
    double l = 0;
    for (double x : s)
      if (x != kNegInf<double>) l += std::exp(x - m);
    out.lse[r] = m + std::log(l);
  };
  return attention_rows<double>(p, ids, score, finish, /*with_o=*/false).lse;
}

bool all_lse_rows(const Problem& p) {
  const double pairs = double(p.batch) * double(p.heads_q) * double(p.seq_q) * double(p.seq_kv);
  return pairs <= double(kAllLseRowsPairs);
}

}  // namespace

Expected expect(const Problem& p, int64_t max_rows) {
  Expected e;
  e.rows = pick_rows(p, max_rows);
  e.truth = attention_fp64(p, e.rows);
  e.plain = attention_same_dtype(p, e.rows);
  if (all_lse_rows(p) && int64_t(e.rows.size()) < p.batch * p.heads_q * p.seq_q) {
    e.lse_rows = pick_rows(p, p.batch * p.heads_q * p.seq_q);
    e.lse = lse_fp64(p, e.lse_rows);
  } else {
    e.lse_rows = e.rows;
    e.lse = e.truth.lse;
  }
  return e;
}

Expected expect_rows(const Problem& p, std::vector<RowId> rows) {
  Expected e;
  e.rows = std::move(rows);
  e.truth = attention_fp64(p, e.rows);
  e.plain = attention_same_dtype(p, e.rows);
  e.lse_rows = e.rows;
  e.lse = e.truth.lse;
  return e;
}

Verdict judge(const Problem& p, const Expected& e, const std::vector<uint16_t>& out_bshd,
              const std::vector<float>* lse_bhs) {
  const int64_t d_v = p.d_v();
  const DType dt = p.dtype();
  Verdict v;
  const size_t o_elems = size_t(p.batch * p.seq_q * p.heads_q * d_v);
  if (out_bshd.size() != o_elems || (lse_bhs && lse_bhs->size() != size_t(p.batch * p.heads_q * p.seq_q))) {
    v.message = "FAIL output of " + std::to_string(out_bshd.size()) + " elements (expected " + std::to_string(o_elems) +
                ")" + (lse_bhs ? ", LSE of " + std::to_string(lse_bhs->size()) : std::string());
    return v;
  }
  for (uint16_t bits : out_bshd)
    if (!std::isfinite(from_half_bits(bits, dt))) ++v.nan_count;
  v.rows_checked = static_cast<int64_t>(e.rows.size());
  detail::ErrorBound bound;
  for (size_t r = 0; r < e.rows.size(); ++r) {
    const RowId id = e.rows[r];
    const size_t oi = detail::o_index(p, id.b, id.q, id.h);
    for (int64_t c = 0; c < d_v; ++c)
      bound.add(from_half_bits(out_bshd[oi + c], dt), e.truth.o[r * d_v + c], e.plain.o[r * d_v + c], dt);
  }
  bool lse_ok = true;
  if (lse_bhs) {
    v.lse_rows_checked = static_cast<int64_t>(e.lse_rows.size());
    for (size_t r = 0; r < e.lse_rows.size(); ++r) {
      const RowId id = e.lse_rows[r];
      const double got = (*lse_bhs)[(id.b * p.heads_q + id.h) * p.seq_q + id.q];
      const double t = e.lse[r];
      if (std::isinf(t) && t < 0) {
        lse_ok = lse_ok && std::isinf(got) && got < 0;
      } else {
        // A NaN or +inf in the reference is a mismatch, never a value to skip.
        const double err = std::isfinite(got) && std::isfinite(t) ? std::abs(got - t) : INFINITY;
        v.max_lse_err = std::max(v.max_lse_err, err);
      }
    }
  }
  const bool within = bound.judge(v);
  // LSE is fp32 computed with ex2.approx/lg2.approx: 1e-3 absolute is far under any bf16 effect.
  const bool lse_close = v.max_lse_err <= 1e-3;
  v.ok = v.nan_count == 0 && within && lse_ok && lse_close;
  std::ostringstream s;
  s << (v.ok ? "PASS" : "FAIL") << " " << detail::ErrorBound::describe(v) << " lse_err=" << v.max_lse_err
    << (lse_ok ? "" : " LSE(-inf) MISMATCH") << " nonfinite=" << v.nan_count << " rows=" << v.rows_checked
    << " lse_rows=" << v.lse_rows_checked;
  v.message = s.str();
  return v;
}

Verdict verify(const Problem& p, const std::vector<uint16_t>& out_bshd, const std::vector<float>* lse_bhs,
               int64_t max_rows) {
  return judge(p, expect(p, max_rows), out_bshd, lse_bhs);
}

double visible_fraction(const Problem& p) {
  if (p.spec.mask == "none" || p.seq_q == 0 || p.seq_kv == 0) return 1.0;
  const Semantics sem(p);
  // Counted at b = h = 0 on every row up to 2^22 pairs, then on evenly spaced rows (an estimate).
  const int64_t step = std::max<int64_t>(1, p.seq_q * p.seq_kv / (int64_t(1) << 22));
  int64_t visible = 0, rows = 0;
  for (int64_t q = 0; q < p.seq_q; q += step, ++rows)
    for (int64_t kv = 0; kv < p.seq_kv; ++kv) visible += sem.visible(0, 0, q, kv);
  return double(visible) / (double(rows) * double(p.seq_kv));
}

void fill_spec_tensors(Problem& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  p.tensors.clear();
  const dsl::Spec spec = to_dsl(p.spec);  // the declared dims, parsed and checked once
  for (const dsl::TensorDecl& t : spec.tensors) {
    HostTensor h;
    h.name = t.name;
    int64_t n = 1, last = 1;
    for (const dsl::Extent& d : t.dims) {
      last = dsl::extent_size(d, launch_sizes(p));
      n *= last;
    }
    if (t.elem == dsl::Type::I32) {
      std::vector<int64_t> cuts;
      std::uniform_int_distribution<int64_t> pos(0, std::max<int64_t>(last - 1, 0));
      for (int i = 0; i < 7; ++i) cuts.push_back(pos(rng));
      std::sort(cuts.begin(), cuts.end());
      h.i32.resize(n);
      for (int64_t i = 0; i < n; ++i) h.i32[i] = int32_t(std::upper_bound(cuts.begin(), cuts.end(), i % last) - cuts.begin());
    } else {
      std::uniform_real_distribution<float> u(0.f, 1.f);
      h.f32.resize(n);
      for (auto& x : h.f32) x = u(rng);
    }
    p.tensors.push_back(std::move(h));
  }
}

}  // namespace flashjit::ref

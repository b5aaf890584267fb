#include "compiler/dsl/interval.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/dsl/desugar.hpp"

namespace flashjit::dsl {

Bounds Bounds::tile(int64_t q0, int64_t q1, int64_t kv0, int64_t kv1, int64_t seq_q, int64_t seq_kv) {
  Bounds bd;
  bd.q = {q0, q1 - 1};
  bd.kv = {kv0, kv1 - 1};
  bd.seq_q = IRange::point(seq_q);
  bd.seq_kv = IRange::point(seq_kv);
  return bd;
}

bool Range::contains(const Value& v) const {
  switch (type) {
    case Type::Bool: return v.type == Type::Bool && (v.b ? can_true : can_false);
    case Type::I32: return v.type == Type::I32 && v.i >= ilo && v.i <= ihi;
    case Type::F32:
      if (v.type != Type::F32) return false;
      if (std::isnan(v.f)) return nan;
      return v.f >= flo && v.f <= fhi;
  }
  return false;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Range irange(int64_t lo, int64_t hi) { Range r; r.type = Type::I32; r.ilo = lo; r.ihi = hi; return r; }
Range frange(double lo, double hi, bool nan) { Range r; r.type = Type::F32; r.flo = lo; r.fhi = hi; r.nan = nan; return r; }
Range brange(bool t, bool f) { Range r; r.type = Type::Bool; r.can_true = t; r.can_false = f; return r; }
Range any_f32() { return frange(-kInf, kInf, true); }

// i32 → f32 rounds to nearest, which is monotone: the rounded bounds bound the rounded values.
Range to_f32(const Range& r) {
  if (r.type == Type::F32) return r;
  return frange(static_cast<float>(r.ilo), static_cast<float>(r.ihi), false);
}

float step_down(float x, int n) { for (int i = 0; i < n; ++i) x = std::nextafter(x, -std::numeric_limits<float>::infinity()); return x; }
float step_up(float x, int n) { for (int i = 0; i < n; ++i) x = std::nextafter(x, std::numeric_limits<float>::infinity()); return x; }

// Bounds computed in double, rounded outward to float. One ulp covers the float rounding of
// a basic operation (round-to-nearest is monotone; the double result is within far less
// than an ulp of the exact one); libm's transcendental functions get a few ulps.
Range round_out(double lo, double hi, bool nan, int ulps) {
  if (std::isnan(lo) || std::isnan(hi)) return any_f32();
  float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
  return frange(step_down(flo, ulps), step_up(fhi, ulps), nan);
}

class Analyzer {
 public:
  Analyzer(const Bounds& b, std::vector<IndexUse>* uses) : bd_(b), uses_(uses) {}
  bool may_wrap = false;

  // The exact int64 result range, wrapped to "anything" when it leaves i32.
  Range wrap_check(int64_t lo, int64_t hi) {
    if (lo < INT32_MIN || hi > INT32_MAX) {
      may_wrap = true;
      return irange(INT32_MIN, INT32_MAX);
    }
    return irange(lo, hi);
  }

  Range run(const Expr& e) {
    switch (e.kind) {
      case ExprKind::IntLit: return irange(e.int_value, e.int_value);
      case ExprKind::FloatLit: return frange(e.float_value, e.float_value, std::isnan(e.float_value));
      case ExprKind::BoolLit: return brange(e.bool_value, !e.bool_value);
      case ExprKind::Var: return var(e.var);
      case ExprKind::Param: {
        if (e.slot >= 0 && static_cast<size_t>(e.slot) < bd_.params.size() && bd_.params[e.slot]) {
          const Value& v = *bd_.params[e.slot];
          if (e.type == Type::F32) { float f = v.as_f32(); return frange(f, f, std::isnan(f)); }
          return irange(v.i, v.i);
        }
        return e.type == Type::F32 ? any_f32() : irange(INT32_MIN, INT32_MAX);
      }
      case ExprKind::TensorRead: {
        IndexUse use;
        use.tensor = e.name;
        use.slot = e.slot;
        for (const auto& a : e.args) {
          Range r = run(*a);
          use.index.push_back({r.ilo, r.ihi});
        }
        if (uses_) uses_->push_back(std::move(use));
        return e.type == Type::F32 ? any_f32() : irange(INT32_MIN, INT32_MAX);
      }
      case ExprKind::Unary: {
        Range a = run(*e.args[0]);
        if (e.un == UnOp::Not) return brange(a.can_false, a.can_true);
        if (a.type == Type::I32) return wrap_check(-a.ihi, -a.ilo);
        return frange(-a.fhi, -a.flo, a.nan);
      }
      case ExprKind::Binary: return binary(e);
      case ExprKind::Select: return select(e, run(*e.args[0]), e.args[1], e.args[2]);
      case ExprKind::Call: return call(e);
      case ExprKind::Shorthand: return run(*desugar(std::make_shared<Expr>(e), bd_.tensors));
    }
    return any_f32();
  }

 private:
  Range var(Builtin v) {
    auto ir = [](const IRange& r) { return irange(r.lo, r.hi); };
    switch (v) {
      case Builtin::B: return ir(bd_.b);
      case Builtin::H: return ir(bd_.h);
      case Builtin::HKv: return ir(bd_.h_kv);
      case Builtin::Q: return ir(bd_.q);
      case Builtin::Kv: return ir(bd_.kv);
      case Builtin::SeqQ: return ir(bd_.seq_q);
      case Builtin::SeqKv: return ir(bd_.seq_kv);
      case Builtin::Score: return frange(bd_.score_lo, bd_.score_hi, bd_.score_nan);
    }
    return any_f32();
  }

  Range join(Range a, Range b, Type t) {
    if (t == Type::Bool) return brange(a.can_true || b.can_true, a.can_false || b.can_false);
    if (t == Type::I32) return irange(std::min(a.ilo, b.ilo), std::max(a.ihi, b.ihi));
    a = to_f32(a);
    b = to_f32(b);
    return frange(std::min(a.flo, b.flo), std::max(a.fhi, b.fhi), a.nan || b.nan);
  }

  Range select(const Expr& e, const Range& c, const ExprPtr& x, const ExprPtr& y) {
    if (c.definitely_true()) return e.type == Type::F32 ? to_f32(run(*x)) : run(*x);
    if (c.definitely_false()) return e.type == Type::F32 ? to_f32(run(*y)) : run(*y);
    return join(run(*x), run(*y), e.type);
  }

  static Range corners_f(double alo, double ahi, double blo, double bhi, double (*f)(double, double), bool nan) {
    double c[4] = {f(alo, blo), f(alo, bhi), f(ahi, blo), f(ahi, bhi)};
    double lo = kInf, hi = -kInf;
    for (double v : c) {
      if (std::isnan(v)) return any_f32();  // inf - inf, 0 * inf: NaN and anything else
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    return round_out(lo, hi, nan, 1);
  }

  // Truncating division over integer boxes: split each operand at zero so that, on each
  // piece, the quotient is monotone in both operands and its extremes are at the corners.
  Range int_div(const Range& a, const Range& b) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    auto add = [&](int64_t v) { lo = std::min(lo, v); hi = std::max(hi, v); };
    if (b.ilo <= 0 && b.ihi >= 0) add(0);  // x / 0 == 0
    const int64_t a_pieces[2][2] = {{a.ilo, std::min<int64_t>(a.ihi, -1)}, {std::max<int64_t>(a.ilo, 0), a.ihi}};
    const int64_t b_pieces[2][2] = {{b.ilo, std::min<int64_t>(b.ihi, -1)}, {std::max<int64_t>(b.ilo, 1), b.ihi}};
    for (auto& ap : a_pieces) {
      if (ap[0] > ap[1]) continue;
      for (auto& bp : b_pieces) {
        if (bp[0] > bp[1]) continue;
        for (int64_t x : {ap[0], ap[1]})
          for (int64_t y : {bp[0], bp[1]}) add(x / y);  // int64: INT32_MIN / -1 does not trap
      }
    }
    return wrap_check(lo, hi);  // 2^31 (INT32_MIN / -1) wraps
  }

  Range int_mod(const Range& a, const Range& b) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    auto add = [&](int64_t l, int64_t h) { lo = std::min(lo, l); hi = std::max(hi, h); };
    if (b.ilo <= 0 && b.ihi >= 0) add(a.ilo, a.ihi);  // x % 0 == x
    // |x % y| <= |y| - 1 and <= |x|, with the sign of x; and x % y == x when |x| < |y|.
    int64_t max_abs_b = 0, min_abs_b = INT64_MAX;
    bool any_nonzero = false;
    if (b.ilo < 0) { any_nonzero = true; max_abs_b = std::max(max_abs_b, -b.ilo); min_abs_b = std::min(min_abs_b, b.ihi < 0 ? -b.ihi : 1); }
    if (b.ihi > 0) { any_nonzero = true; max_abs_b = std::max(max_abs_b, b.ihi); min_abs_b = std::min(min_abs_b, b.ilo > 0 ? b.ilo : 1); }
    if (any_nonzero) {
      int64_t m = max_abs_b - 1;
      int64_t max_abs_a = std::max(a.ihi < 0 ? -a.ilo : a.ihi, -a.ilo);
      if (max_abs_a < min_abs_b) {
        add(a.ilo, a.ihi);
      } else {
        int64_t l = a.ilo >= 0 ? 0 : std::max(a.ilo, -m);
        int64_t h = a.ihi <= 0 ? 0 : std::min(a.ihi, m);
        add(l, h);
      }
    }
    return irange(lo, hi);
  }

  Range fmod_range(const Range& a, const Range& b) {
    bool nan = a.nan || b.nan || (b.flo <= 0 && b.fhi >= 0) || std::isinf(a.flo) || std::isinf(a.fhi);
    double ma = std::max(std::fabs(a.flo), std::fabs(a.fhi));
    double mb = std::max(std::fabs(b.flo), std::fabs(b.fhi));
    double m = std::min(ma, mb);
    double lo = a.flo >= 0 ? 0.0 : -m;
    double hi = a.fhi <= 0 ? 0.0 : m;
    return frange(lo, hi, nan);  // fmod is exact: no rounding to widen for
  }

  Range compare(BinOp op, Range a, Range b) {
    if (a.type == Type::Bool) {
      bool eq_t = (a.can_true && b.can_true) || (a.can_false && b.can_false);
      bool eq_f = (a.can_true && b.can_false) || (a.can_false && b.can_true);
      return op == BinOp::Eq ? brange(eq_t, eq_f) : brange(eq_f, eq_t);
    }
    double alo, ahi, blo, bhi;
    bool nan = false;
    if (a.type == Type::I32 && b.type == Type::I32) {
      alo = static_cast<double>(a.ilo); ahi = static_cast<double>(a.ihi);
      blo = static_cast<double>(b.ilo); bhi = static_cast<double>(b.ihi);
    } else {
      a = to_f32(a);
      b = to_f32(b);
      alo = a.flo; ahi = a.fhi; blo = b.flo; bhi = b.fhi;
      nan = a.nan || b.nan;
    }
    bool t = false, f = false;
    switch (op) {
      case BinOp::Lt: t = alo < bhi; f = ahi >= blo; break;
      case BinOp::Le: t = alo <= bhi; f = ahi > blo; break;
      case BinOp::Gt: t = ahi > blo; f = alo <= bhi; break;
      case BinOp::Ge: t = ahi >= blo; f = alo < bhi; break;
      case BinOp::Eq: t = alo <= bhi && blo <= ahi; f = !(alo == ahi && blo == bhi && alo == blo); break;
      default: t = !(alo == ahi && blo == bhi && alo == blo); f = alo <= bhi && blo <= ahi; break;
    }
    // An empty f32 range (only NaN possible) can make both flags false above; NaN decides.
    if (nan) {
      if (op == BinOp::Ne) t = true; else f = true;
    }
    return brange(t, f);
  }

  Range binary(const Expr& e) {
    if (e.bin == BinOp::And || e.bin == BinOp::Or) {
      Range a = run(*e.args[0]);
      Range b = run(*e.args[1]);
      if (e.bin == BinOp::And) return brange(a.can_true && b.can_true, a.can_false || b.can_false);
      return brange(a.can_true || b.can_true, a.can_false && b.can_false);
    }
    Range a = run(*e.args[0]);
    Range b = run(*e.args[1]);
    if (!is_arithmetic(e.bin)) return compare(e.bin, a, b);
    if (a.type == Type::I32 && b.type == Type::I32) {
      switch (e.bin) {
        case BinOp::Add: return wrap_check(a.ilo + b.ilo, a.ihi + b.ihi);
        case BinOp::Sub: return wrap_check(a.ilo - b.ihi, a.ihi - b.ilo);
        case BinOp::Mul: {
          int64_t c[4] = {a.ilo * b.ilo, a.ilo * b.ihi, a.ihi * b.ilo, a.ihi * b.ihi};
          return wrap_check(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
        }
        case BinOp::Div: return int_div(a, b);
        default: return int_mod(a, b);
      }
    }
    a = to_f32(a);
    b = to_f32(b);
    bool nan = a.nan || b.nan;
    switch (e.bin) {
      case BinOp::Add: return corners_f(a.flo, a.fhi, b.flo, b.fhi, [](double x, double y) { return x + y; }, nan);
      case BinOp::Sub: return corners_f(a.flo, a.fhi, b.flo, b.fhi, [](double x, double y) { return x - y; }, nan);
      case BinOp::Mul: return corners_f(a.flo, a.fhi, b.flo, b.fhi, [](double x, double y) { return x * y; }, nan);
      case BinOp::Div:
        if (b.flo <= 0 && b.fhi >= 0) return any_f32();
        return corners_f(a.flo, a.fhi, b.flo, b.fhi, [](double x, double y) { return x / y; }, nan);
      default: return fmod_range(a, b);
    }
  }

  Range call(const Expr& e) {
    if (e.fn == Fn::Where) return select(e, run(*e.args[0]), e.args[1], e.args[2]);
    Range a = run(*e.args[0]);
    if (e.fn == Fn::Min || e.fn == Fn::Max) {
      Range b = run(*e.args[1]);
      if (a.type == Type::I32 && b.type == Type::I32) {
        if (e.fn == Fn::Min) return irange(std::min(a.ilo, b.ilo), std::min(a.ihi, b.ihi));
        return irange(std::max(a.ilo, b.ilo), std::max(a.ihi, b.ihi));
      }
      a = to_f32(a);
      b = to_f32(b);
      Range r = e.fn == Fn::Min ? frange(std::min(a.flo, b.flo), std::min(a.fhi, b.fhi), a.nan && b.nan)
                                : frange(std::max(a.flo, b.flo), std::max(a.fhi, b.fhi), a.nan && b.nan);
      // fmin/fmax return the other operand when one is NaN.
      if (a.nan) { r.flo = std::min(r.flo, b.flo); r.fhi = std::max(r.fhi, b.fhi); }
      if (b.nan) { r.flo = std::min(r.flo, a.flo); r.fhi = std::max(r.fhi, a.fhi); }
      return r;
    }
    if (e.fn == Fn::Abs) {
      if (a.type == Type::I32) {
        if (a.ilo >= 0) return a;
        if (a.ihi <= 0) return wrap_check(-a.ihi, -a.ilo);
        return wrap_check(0, std::max(-a.ilo, a.ihi));
      }
      if (a.flo >= 0) return a;
      if (a.fhi <= 0) return frange(-a.fhi, -a.flo, a.nan);
      return frange(0, std::max(-a.flo, a.fhi), a.nan);
    }
    a = to_f32(a);
    switch (e.fn) {
      case Fn::Exp: return round_out(std::exp(a.flo), std::exp(a.fhi), a.nan, 4);
      case Fn::Exp2: return round_out(std::exp2(a.flo), std::exp2(a.fhi), a.nan, 4);
      case Fn::Tanh: {
        // Kernels use tanh.approx.f32 (~2^-11 relative error, PTX ISA "tanh"): widen by 2^-10.
        const double lo = std::tanh(a.flo), hi = std::tanh(a.fhi);
        Range r = round_out(lo - std::abs(lo) * 0x1p-10, hi + std::abs(hi) * 0x1p-10, a.nan, 4);
        r.flo = std::max(r.flo, -1.0);
        r.fhi = std::min(r.fhi, 1.0);
        return r;
      }
      case Fn::Log:
      case Fn::Sqrt: {
        bool nan = a.nan || a.flo < 0;
        if (a.fhi < 0) return frange(-kInf, kInf, true);
        double lo = std::max(a.flo, 0.0);
        if (e.fn == Fn::Log) return round_out(std::log(lo), std::log(a.fhi), nan, 4);
        Range r = round_out(std::sqrt(lo), std::sqrt(a.fhi), nan, 4);
        if (a.flo <= 0) r.flo = std::min(r.flo, -0.0);
        return r;
      }
      default: return frange(std::floor(a.flo), std::floor(a.fhi), a.nan);  // floor is exact
    }
  }

  const Bounds& bd_;
  std::vector<IndexUse>* uses_;
};

}  // namespace

AnalysisResult analyze(const Expr& e, const Bounds& bounds, std::vector<IndexUse>* index_uses) {
  Analyzer an(bounds, index_uses);
  AnalysisResult r;
  r.value = an.run(e);
  r.may_wrap = an.may_wrap;
  return r;
}

}  // namespace flashjit::dsl

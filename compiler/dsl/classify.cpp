#include "compiler/dsl/classify.hpp"

#include <algorithm>

#include "compiler/dsl/affine.hpp"
#include "compiler/dsl/interval.hpp"

namespace flashjit::dsl {

std::string_view tile_class_name(TileClass c) {
  switch (c) {
    case TileClass::Empty: return "EMPTY";
    case TileClass::Full: return "FULL";
    case TileClass::Partial: return "PARTIAL";
  }
  return "?";
}

namespace {

using I128 = __int128;
// Sorted, disjoint, inclusive kv intervals within one row's [lo, hi].
using Set = std::vector<std::pair<int64_t, int64_t>>;

I128 floor_div(I128 a, I128 b) {  // b > 0
  I128 q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
I128 ceil_div(I128 a, I128 b) { return -floor_div(-a, b); }  // b > 0

Set intersect(const Set& a, const Set& b) {
  Set out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    int64_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (lo <= hi) out.push_back({lo, hi});
    if (a[i].second < b[j].second) ++i; else ++j;
  }
  return out;
}

Set unite(const Set& a, const Set& b) {
  Set all = a;
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  Set out;
  for (const auto& iv : all) {
    if (!out.empty() && iv.first <= out.back().second + 1) out.back().second = std::max(out.back().second, iv.second);
    else out.push_back(iv);
  }
  return out;
}

// The keys in [lo, hi] for which formula f (over q and kv only, no Unknown) holds at row q.
Set row_set(const Formula& f, int64_t q, int64_t lo, int64_t hi) {
  using K = Formula::Kind;
  switch (f.kind) {
    case K::True: return {{lo, hi}};
    case K::False: case K::Unknown: return {};
    case K::Atom: {
      QKvAtom a = qkv_atom(f.atom);
      I128 v = static_cast<I128>(a.a_q) * q + a.c;  // atom: a_kv * kv + v >= 0
      if (a.a_kv == 0) return v >= 0 ? Set{{lo, hi}} : Set{};
      I128 l = lo, h = hi;
      if (a.a_kv > 0) l = std::max<I128>(l, ceil_div(-v, a.a_kv));
      else h = std::min<I128>(h, floor_div(v, -static_cast<I128>(a.a_kv)));
      if (l > h) return {};
      return {{static_cast<int64_t>(l), static_cast<int64_t>(h)}};
    }
    case K::And: {
      Set s = row_set(f.kids[0], q, lo, hi);
      for (size_t i = 1; i < f.kids.size() && !s.empty(); ++i) s = intersect(s, row_set(f.kids[i], q, lo, hi));
      return s;
    }
    case K::Or: {
      Set s;
      for (const auto& k : f.kids) s = unite(s, row_set(k, q, lo, hi));
      return s;
    }
  }
  return {};
}

// Atoms whose i32 arithmetic may wrap inside this box are not linear there: make them Unknown.
Formula drop_wrapping(const Formula& f, const Bounds& bd) {
  if (f.kind == Formula::Kind::Atom) {
    if (f.source && analyze(*f.source, bd).may_wrap) {
      Formula u;
      u.kind = Formula::Kind::Unknown;
      u.source = f.source;
      return u;
    }
    return f;
  }
  if (f.kind != Formula::Kind::And && f.kind != Formula::Kind::Or) return f;
  Formula r;
  r.kind = f.kind;
  for (const auto& k : f.kids) r.kids.push_back(drop_wrapping(k, bd));
  return r;
}

}  // namespace

TileClass classify(const ExprPtr& mask, const Box& box, const MaskInputs& in) {
  if (box.q0 >= box.q1 || box.kv0 >= box.kv1) return TileClass::Empty;  // nothing to attend
  Bounds bd = Bounds::tile(box.q0, box.q1, box.kv0, box.kv1, in.seq_q, in.seq_kv);
  bd.params = in.params;
  bd.tensors = in.tensors;
  if (in.b) bd.b = IRange::point(*in.b);
  if (in.h) bd.h = IRange::point(*in.h);
  if (in.h_kv) bd.h_kv = IRange::point(*in.h_kv);
  Range r = analyze(*mask, bd).value;
  if (r.definitely_false()) return TileClass::Empty;
  if (r.definitely_true()) return TileClass::Full;
  if (box.q1 - box.q0 > kMaxSweepRows) return TileClass::Partial;

  SymbolValues sv;
  sv.b = in.b;
  sv.h = in.h;
  sv.h_kv = in.h_kv;
  sv.seq_q = in.seq_q;
  sv.seq_kv = in.seq_kv;
  sv.params = in.params;
  Formula f = substitute(drop_wrapping(mask_formula(mask, in.tensors), bd), sv);
  Formula over = approximate(f, true);    // mask ⇒ over
  Formula under = approximate(f, false);  // under ⇒ mask
  if (over.kind == Formula::Kind::False) return TileClass::Empty;
  if (under.kind == Formula::Kind::True) return TileClass::Full;
  bool any_visible = false, all_visible = true;
  const int64_t lo = box.kv0, hi = box.kv1 - 1;
  for (int64_t q = box.q0; q < box.q1 && (!any_visible || all_visible); ++q) {
    if (!any_visible && !row_set(over, q, lo, hi).empty()) any_visible = true;
    if (all_visible) {
      Set s = row_set(under, q, lo, hi);
      if (!(s.size() == 1 && s[0].first == lo && s[0].second == hi)) all_visible = false;
    }
  }
  if (!any_visible) return TileClass::Empty;
  if (all_visible) return TileClass::Full;
  return TileClass::Partial;
}

}  // namespace flashjit::dsl

// The tiles a kernel walks, as its emitted IR computes them: tile_rows, emit_kv_bounds,
// covering_tiles and tile_in_full_range composed as the forward, the backward's two walks and the
// block-map pre-pass compose them (templates/fwd/forward.cpp, templates/bwd/backward.cpp,
// templates/common/tile_map.cpp), run on the host (tests/internal/ir_eval) against brute force:
// every tile with a visible element is walked, and every tile taken as full (no per-element mask)
// has every element visible. Tile sizes and lengths are random, off the powers of two too.
#include <catch2/catch.hpp>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "compiler/dsl/kv_range.hpp"
#include "templates/common/kv_bounds.hpp"
#include "tests/dsl/helpers.hpp"
#include "tests/internal/ir_eval.hpp"

using namespace flashjit;
using namespace flashjit::dsl;
using namespace flashjit::dsl::test;

namespace {

// One row tile's walk: arguments (tile, b, h, h_kv, seq_q, seq_kv, range_ok, n0, params...), `keys`
// for the transposed walk (rows are keys, columns queries: the lengths exchanged).
class EmittedWalk {
 public:
  EmittedWalk(const KvRange* range, size_t n_params, bool keys, int rows, int cols) : module_("walk", ctx_) {
    auto* i32 = llvm::Type::getInt32Ty(ctx_);
    std::vector<llvm::Type*> types(8 + n_params, i32);
    types[6] = llvm::Type::getInt1Ty(ctx_);
    fn_ = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), types, false),
                                 llvm::GlobalValue::ExternalLinkage, "walk", module_);
    tile::Emitter e(module_, fn_);
    e.b.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
    KvBoundsInputs in;
    in.b = fn_->getArg(1), in.h = fn_->getArg(2), in.h_kv = fn_->getArg(3);
    in.seq_q = fn_->getArg(4), in.seq_kv = fn_->getArg(5), in.range_ok = fn_->getArg(6);
    for (size_t i = 0; i < n_params; ++i) in.params.push_back(fn_->getArg(8 + i));
    const TileRows r = tile_rows(e, fn_->getArg(0), rows, keys ? in.seq_kv : in.seq_q);
    in.q_first = r.first, in.q_last = r.last;
    if (keys) std::swap(in.seq_q, in.seq_kv);
    const KvBounds bounds = emit_kv_bounds(e, range, in);
    span_ = covering_tiles(e, bounds, cols);
    rows_ = r;
    full_ = tile_in_full_range(e, bounds, fn_->getArg(7), cols);
  }

  struct At {
    int64_t first, last, span_first, span_end;
    bool full;
  };
  At at(int64_t tile, const World& w, bool range_ok, int64_t n0) {
    flashjit::test::IrEval ev;
    const int64_t args[] = {tile, w.b, w.h, w.h_kv, w.seq_q, w.seq_kv, range_ok, n0};
    for (int i = 0; i < 8; ++i) ev.bind(fn_->getArg(i), args[i]);
    for (size_t i = 0; i < w.params.size(); ++i)
      ev.bind(fn_->getArg(8 + i), w.params[i].type == Type::I32 ? w.params[i].i : 0);
    return {ev.value(rows_.first), ev.value(rows_.last), ev.value(span_.first), ev.value(span_.end), ev.value(full_) != 0};
  }

 private:
  llvm::LLVMContext ctx_;
  llvm::Module module_;
  llvm::Function* fn_;
  TileRows rows_{};
  TileSpan span_{};
  llvm::Value* full_ = nullptr;
};

SymbolValues values_of(const World& w) {
  SymbolValues v;
  v.b = w.b, v.h = w.h, v.h_kv = w.h_kv, v.seq_q = w.seq_q, v.seq_kv = w.seq_kv;
  for (const auto& p : w.params) v.params.push_back(p);
  return v;
}

// Every row tile of the walk against brute force over each column tile.
void check_walk(const ExprPtr& m, const std::string& text, const KvRange& r, const World& w, const Decls& d, bool keys,
                int rows, int cols) {
  EmittedWalk walk(&r, d.params.size(), keys, rows, cols);
  const SymbolValues v = values_of(w);
  const bool ok = !kv_range_may_overflow(r, keys ? swapped_sizes(v) : v, &d.tensors);
  const int64_t seq_rows = keys ? w.seq_kv : w.seq_q, seq_cols = keys ? w.seq_q : w.seq_kv;
  for (int64_t t = 0; t * rows < seq_rows; ++t)
    for (int64_t c = 0; c * cols < seq_cols; ++c) {
      const EmittedWalk::At a = walk.at(t, w, ok, c * cols);
      INFO(text << (keys ? " key" : " query") << " tile " << t << " of " << rows << ", column tile " << c << " of " << cols
                << ", seq " << w.seq_q << "x" << w.seq_kv << ": rows [" << a.first << "," << a.last << "] walks ["
                << a.span_first << "," << a.span_end << ") full " << a.full);
      REQUIRE(a.first == t * rows);
      REQUIRE(a.last == std::min<int64_t>(seq_rows, (t + 1) * rows) - 1);
      const int64_t c1 = std::min<int64_t>(seq_cols, (c + 1) * cols);
      const Brute b = keys ? brute_force(*m, w, c * cols, c1, a.first, a.last + 1)
                           : brute_force(*m, w, a.first, a.last + 1, c * cols, c1);
      if (b.any) REQUIRE((c >= a.span_first && c < a.span_end));
      if (a.full) REQUIRE((b.all && c1 == (c + 1) * cols));
    }
}

}  // namespace

TEST_CASE("tile walk: emitted spans cover every visible tile and full tiles are fully visible", "[kv_bounds][property]") {
  std::mt19937 rng(2026);
  const Decls d = Decls::standard();
  for (int i = 0; i < 250; ++i) {
    const std::string text = random_mask(rng, i % 3 != 0, rand_int(rng, 1, 4));
    const ExprPtr m = compile(text, d, ExprRole::Mask);
    const World w = random_world(d, rng, 140);
    const int rows = rand_int(rng, 1, 70), cols = rand_int(rng, 1, 70);
    check_walk(m, text, derive_kv_range(m, &d.tensors), w, d, false, rows, cols);
    check_walk(m, text, derive_q_range(m, &d.tensors), w, d, true, rows, cols);
  }
}

TEST_CASE("tile walk: shorthands off the tile grid with every tile size the kernels use", "[kv_bounds]") {
  const Decls d = Decls::standard();
  const char* masks[] = {"window(254, 0)", "window(257, 0)", "window(1, 130)", "causal_br", "prefix(n)",
                         "prefix(n) || causal", "causal && window(w, 0)"};
  // Every tile size the heuristics and the tuner's search spaces hold (forward_search_space in
  // templates/fwd/plan.cpp, backward_search_space in templates/bwd/plan.cpp), rows against columns
  // both ways, and the one-warp 16-row tile.
  std::vector<std::pair<int, int>> tiles = {{16, 32}};
  for (int rows : {32, 64, 128, 256})
    for (int cols : {32, 64, 128}) tiles.push_back({rows, cols});
  std::mt19937 rng(77);
  for (const char* text : masks) {
    const ExprPtr m = compile(text, d, ExprRole::Mask);
    for (auto [rows, cols] : tiles)
      for (int i = 0; i < 3; ++i) {
        World w = random_world(d, rng, 520);
        w.params[1] = Value::of_i32(rand_int(rng, 0, 300));  // n
        w.params[3] = Value::of_i32(rand_int(rng, 0, 300));  // w
        check_walk(m, text, derive_kv_range(m, &d.tensors), w, d, false, rows, cols);
        check_walk(m, text, derive_q_range(m, &d.tensors), w, d, true, rows, cols);
      }
  }
}

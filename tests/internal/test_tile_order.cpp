// The order of a causal launch's query tiles, as ordered_tile's emitted IR computes it
// (templates/fwd/tile_order.cpp), run on the host (tests/internal/ir_eval): every (query tile,
// unit) pair is served exactly once, each group is a contiguous run of indices, and within a group
// the query tiles go from the last to the first. The sizes include last groups smaller than the
// others, one query tile, one unit and key lengths whose K/V alone exceed the 16 MiB of a group.
#include <catch2/catch.hpp>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <set>

#include "templates/fwd/tile_order.hpp"
#include "tests/internal/ir_eval.hpp"

using namespace flashjit;

namespace {

// ordered_tile over arguments (i, q_tiles, units, seq_kv, gqa_group).
class EmittedOrder {
 public:
  explicit EmittedOrder(const AttentionSpec& spec) : module_("order", ctx_) {
    auto* i32 = llvm::Type::getInt32Ty(ctx_);
    std::vector<llvm::Type*> types(5, i32);
    fn_ = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx_), types, false),
                                 llvm::GlobalValue::ExternalLinkage, "order", module_);
    tile::Emitter e(module_, fn_);
    e.b.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
    out_ = ordered_tile(e, spec, fn_->getArg(0), fn_->getArg(1), fn_->getArg(2), fn_->getArg(3), fn_->getArg(4));
  }

  std::pair<int64_t, int64_t> at(int64_t i, int64_t q_tiles, int64_t units, int64_t seq_kv, int64_t group) {
    flashjit::test::IrEval ev;
    const int64_t args[] = {i, q_tiles, units, seq_kv, group};
    for (int a = 0; a < 5; ++a) ev.bind(fn_->getArg(a), args[a]);
    return {ev.value(out_.q_tile), ev.value(out_.unit)};
  }

 private:
  llvm::LLVMContext ctx_;
  llvm::Module module_;
  llvm::Function* fn_;
  OrderedTile out_{};
};

}  // namespace

TEST_CASE("tile order: each query tile of each unit once, groups contiguous, longest first within a group",
          "[tile_order]") {
  for (int d : {64, 128, 256}) {
    AttentionSpec spec;
    spec.head_dim_qk = spec.head_dim_v = d;
    EmittedOrder order(spec);
    // The units (heads) whose K and V rows fit 16 MiB: at least one.
    const int64_t rows = (16 << 20) / (2 * d * 2);
    for (int64_t seq_kv : {1L, 700L, 1000L, 4096L, rows / 3, rows + 1, 4 * rows})
      for (int64_t group : {1, 4})
        for (int64_t q_tiles : {1, 2, 7})
          for (int64_t units : {1, 2, 5, 11, 72}) {
            const int64_t size = std::max<int64_t>(1, rows * group / seq_kv);
            std::set<std::pair<int64_t, int64_t>> seen;
            int64_t prev_first = -1, prev_q = 0;
            for (int64_t i = 0; i < q_tiles * units; ++i) {
              const auto [q, u] = order.at(i, q_tiles, units, seq_kv, group);
              INFO("d " << d << " seq_kv " << seq_kv << " group " << group << " q_tiles " << q_tiles << " units "
                        << units << " i " << i << ": query tile " << q << ", unit " << u);
              REQUIRE((q >= 0 && q < q_tiles && u >= 0 && u < units));
              REQUIRE(seen.insert({q, u}).second);
              // The group of unit u starts at a multiple of the group size; every index of a group
              // precedes the next group's, and within one the query tile never rises.
              const int64_t first = u / size * size;
              REQUIRE(first >= prev_first);
              if (first == prev_first) REQUIRE(q <= prev_q);
              prev_first = first, prev_q = q;
            }
            REQUIRE(seen.size() == static_cast<size_t>(q_tiles * units));
          }
  }
}

// The tiles one CTA walks along the other sequence (the forward: the key tiles of its query tile):
// a closed-form run [first, first + count), or the list the block-map pre-pass wrote, whose entries
// (tile index; bit 31 set when every element is visible) ride in registers `depth` steps ahead.
#pragma once

#include <vector>

#include "compiler/tile/emitter.hpp"

namespace flashjit {

class TileWalk {
 public:
  // `list` null: the closed-form run. With a list, `count` is its length (loaded from the map).
  // A pipeline of `depth` ≥ 2 stages loads each list entry one step before it is needed: a load at
  // the point of use puts an L1/L2 round trip in front of every cp.async issue and every
  // full/partial branch (docs/perf-notes.md §7). depth 1 configs are the register-bound ones: they
  // load at the point of use.
  TileWalk(tile::Emitter& e, llvm::Value* first, llvm::Value* count, llvm::Value* list, int depth);

  llvm::Value* count() const { return count_; }
  bool has_list() const { return list_ != nullptr; }

  // The list entries a step reads, from the look-ahead registers (null without a look-ahead).
  struct Step {
    llvm::Value* now = nullptr;    // step j's
    llvm::Value* last = nullptr;   // step j + depth − 1's
  };
  // At the top of step j: reads its cached entries, shifts the window, fetches step j + depth's.
  Step begin_step(tile::Emitter& e, llvm::Value* j);
  // The entry of step j + k (k < depth): `cached` when given, else from the list (null without one).
  llvm::Value* entry(tile::Emitter& e, llvm::Value* j, int k, llvm::Value* cached = nullptr);
  // The tile index of step i with entry `entry`.
  llvm::Value* tile(tile::Emitter& e, llvm::Value* i, llvm::Value* entry) const;
  // Whether a listed tile is wholly visible (bit 31 of its entry).
  llvm::Value* listed_full(tile::Emitter& e, llvm::Value* entry) const;

 private:
  llvm::Value* load_entry(tile::Emitter& e, llvm::Value* i) const;
  llvm::Value *first_, *count_, *list_;
  int depth_;
  bool look_ahead_;
  std::vector<llvm::AllocaInst*> ahead_;
};

}  // namespace flashjit

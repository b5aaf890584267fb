// Shared helpers for the DSL tests: compiling expressions against declarations, a seeded
// random generator of well-typed masks, and brute-force evaluation over a tile.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "compiler/dsl/ast.hpp"
#include "compiler/dsl/decl.hpp"
#include "compiler/dsl/interpreter.hpp"
#include "compiler/dsl/typecheck.hpp"

namespace flashjit::dsl::test {

// The declarations the random masks use. Slots follow this order (already sorted by name).
struct Decls {
  std::vector<Param> params;
  std::vector<TensorDecl> tensors;
  static Decls standard();  // i32 params lo, n, w; f32 param t; tensors doc[seq_kv] i32, val[seq_kv] f32
};

ExprPtr compile(const std::string& text, const Decls& d, ExprRole role);

// Concrete inputs for brute force: params and tensor contents.
struct World {
  int32_t b = 0, h = 0, h_kv = 0;
  int32_t seq_q = 1, seq_kv = 1;
  std::vector<Value> params;
  std::vector<std::vector<int32_t>> i32_data;
  std::vector<std::vector<float>> f32_data;
  std::vector<TensorData> tensors;
  Env env(int32_t q, int32_t kv, float score = 0.0f) const;
};
// Tensors of size max(seq_q, seq_kv) (both are indexed by q and kv); doc ids are runs.
World random_world(const Decls& d, std::mt19937& rng, int32_t max_seq);

// Random well-typed mask source text. affine_only restricts to the shapes the closed form
// handles exactly (sums of q, kv, seq, i32 params, constants; comparisons; && || !; the
// band shorthands).
std::string random_mask(std::mt19937& rng, bool affine_only, int depth = 3);

// Whether every / no element of the box is visible, by evaluating each one.
struct Brute {
  bool any = false, all = true;
};
Brute brute_force(const Expr& mask, const World& w, int64_t q0, int64_t q1, int64_t kv0, int64_t kv1);

inline int rand_int(std::mt19937& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

}  // namespace flashjit::dsl::test

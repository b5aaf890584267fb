// DSL mask/score expressions → LLVM IR, with the interpreter's semantics (compiler/dsl/interpreter.hpp).
#pragma once

#include <vector>

#include "compiler/dsl/ast.hpp"
#include "compiler/dsl/decl.hpp"
#include "compiler/tile/emitter.hpp"

namespace flashjit {

// The IR values an expression may read. Builtins and params are scalars (i32, or f32 for f32
// params and `score`); tensors are global pointers with their extents (i32, one per dim).
struct ExprInputs {
  llvm::Value *b = nullptr, *h = nullptr, *h_kv = nullptr, *q = nullptr, *kv = nullptr;
  llvm::Value *seq_q = nullptr, *seq_kv = nullptr, *score = nullptr;
  llvm::Value *heads_q = nullptr;  // not readable by expressions; kept for the template's indexing
  std::vector<llvm::Value*> params;  // by slot
  struct TensorArg {
    llvm::Value* ptr = nullptr;            // ptr addrspace(1)
    std::vector<llvm::Value*> extents;     // i32, row-major dims
    dsl::Type elem = dsl::Type::I32;
  };
  std::vector<TensorArg> tensors;    // by slot
};

// `e` must be typed and desugared (no shorthands). Returns i1 for bool, i32, or f32. Tensor
// reads are plain loads: the launch checks that every index stays inside its extent.
llvm::Value* lower_expr(tile::Emitter& em, const dsl::Expr& e, const ExprInputs& in);

}  // namespace flashjit

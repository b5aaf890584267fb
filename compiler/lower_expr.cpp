#include "compiler/lower_expr.hpp"

#include <cmath>

#include <llvm/IR/IntrinsicsNVPTX.h>

#include "compiler/tile/gpu.hpp"
#include "flashjit/flashjit.hpp"

namespace flashjit {

namespace {

using dsl::BinOp;
using dsl::Expr;
using dsl::ExprKind;
using dsl::Fn;
using dsl::Type;
using llvm::Value;

struct Lowerer {
  tile::Emitter& e;
  const ExprInputs& in;

  Value* f32(Value* v, Type t) { return t == Type::F32 ? v : e.b.CreateSIToFP(v, e.f32()); }

  [[noreturn]] void bug(const std::string& what) {
    throw Error(ErrorKind::internal, "internal error: cannot lower " + what + " (a flashjit bug; please report the spec)");
  }

  // i32 division and remainder as the interpreter defines them: x / 0 == 0, x % 0 == x, and
  // INT32_MIN / -1 wraps to INT32_MIN (the hardware would trap or give garbage on both).
  Value* int_div(Value* a, Value* b, bool rem) {
    auto& B = e.b;
    Value* zero = B.CreateICmpEQ(b, e.c32(0));
    Value* overflow = B.CreateAnd(B.CreateICmpEQ(a, e.c32(INT32_MIN)), B.CreateICmpEQ(b, e.c32(-1)));
    Value* safe_b = B.CreateSelect(B.CreateOr(zero, overflow), e.c32(1), b);
    Value* r = rem ? B.CreateSRem(a, safe_b) : B.CreateSDiv(a, safe_b);
    if (rem) return B.CreateSelect(zero, a, B.CreateSelect(overflow, e.c32(0), r));
    return B.CreateSelect(zero, e.c32(0), B.CreateSelect(overflow, e.c32(INT32_MIN), r));
  }

  Value* call(const Expr& x) {
    auto& B = e.b;
    std::vector<Value*> a;
    for (const auto& arg : x.args) a.push_back(lower(*arg));
    auto arg_f32 = [&](size_t i) { return f32(a[i], x.args[i]->type); };
    const float log2e = 1.4426950408889634f, ln2 = 0.6931471805599453f;
    switch (x.fn) {
      case Fn::Min:
      case Fn::Max:
        if (x.type == Type::I32)
          return B.CreateBinaryIntrinsic(x.fn == Fn::Min ? llvm::Intrinsic::smin : llvm::Intrinsic::smax, a[0], a[1]);
        return x.fn == Fn::Min ? B.CreateMinNum(arg_f32(0), arg_f32(1)) : B.CreateMaxNum(arg_f32(0), arg_f32(1));
      case Fn::Abs:
        if (x.type == Type::I32) return B.CreateSelect(B.CreateICmpSLT(a[0], e.c32(0)), B.CreateNeg(a[0]), a[0]);
        return B.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, arg_f32(0));
      // Transcendentals use the SFU approximations (ex2/lg2.approx, ~2 ulp) as FlashAttention does.
      case Fn::Exp: return tile::exp2_fast(e, B.CreateFMul(arg_f32(0), e.cf(log2e)));
      case Fn::Exp2: return tile::exp2_fast(e, arg_f32(0));
      case Fn::Log: return B.CreateFMul(tile::log2_fast(e, arg_f32(0)), e.cf(ln2));
      // tanh.approx (one SFU op) as FlashAttention's softcap: the ex2 + rcp form took three SFU
      // ops per score with the softmax's ex2, and the SFU bounds the loop (docs/perf-notes.md §7).
      case Fn::Tanh: return tile::tanh_fast(e, arg_f32(0));
      case Fn::Sqrt: return B.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, arg_f32(0));
      case Fn::Floor: return B.CreateUnaryIntrinsic(llvm::Intrinsic::floor, arg_f32(0));
      case Fn::Where: return select(x, a[0], a[1], a[2]);
    }
    bug("function");
  }

  Value* select(const Expr& x, Value* c, Value* t, Value* f) {
    if (x.type == Type::F32) {
      t = f32(t, x.args[1]->type);
      f = f32(f, x.args[2]->type);
    }
    return e.b.CreateSelect(c, t, f);
  }

  Value* binary(const Expr& x) {
    auto& B = e.b;
    const Expr &l = *x.args[0], &r = *x.args[1];
    if (x.bin == BinOp::And) return B.CreateAnd(lower(l), lower(r));
    if (x.bin == BinOp::Or) return B.CreateOr(lower(l), lower(r));
    Value* a = lower(l);
    Value* b = lower(r);
    const bool fp = l.type == Type::F32 || r.type == Type::F32;
    if (dsl::is_comparison(x.bin)) {
      if (l.type == Type::Bool) return x.bin == BinOp::Eq ? B.CreateICmpEQ(a, b) : B.CreateICmpNE(a, b);
      if (fp) {
        a = f32(a, l.type);
        b = f32(b, r.type);
        switch (x.bin) {
          case BinOp::Lt: return B.CreateFCmpOLT(a, b);
          case BinOp::Le: return B.CreateFCmpOLE(a, b);
          case BinOp::Gt: return B.CreateFCmpOGT(a, b);
          case BinOp::Ge: return B.CreateFCmpOGE(a, b);
          case BinOp::Eq: return B.CreateFCmpOEQ(a, b);
          default: return B.CreateFCmpUNE(a, b);
        }
      }
      switch (x.bin) {
        case BinOp::Lt: return B.CreateICmpSLT(a, b);
        case BinOp::Le: return B.CreateICmpSLE(a, b);
        case BinOp::Gt: return B.CreateICmpSGT(a, b);
        case BinOp::Ge: return B.CreateICmpSGE(a, b);
        case BinOp::Eq: return B.CreateICmpEQ(a, b);
        default: return B.CreateICmpNE(a, b);
      }
    }
    if (fp) {
      a = f32(a, l.type);
      b = f32(b, r.type);
      switch (x.bin) {
        case BinOp::Add: return B.CreateFAdd(a, b);
        case BinOp::Sub: return B.CreateFSub(a, b);
        case BinOp::Mul: return B.CreateFMul(a, b);
        case BinOp::Div: return B.CreateFDiv(a, b);
        default: return B.CreateFRem(a, b);  // fmodf, as the interpreter
      }
    }
    switch (x.bin) {  // i32 wraps: no nsw/nuw flags
      case BinOp::Add: return B.CreateAdd(a, b);
      case BinOp::Sub: return B.CreateSub(a, b);
      case BinOp::Mul: return B.CreateMul(a, b);
      case BinOp::Div: return int_div(a, b, false);
      default: return int_div(a, b, true);
    }
  }

  Value* tensor_read(const Expr& x) {
    const ExprInputs::TensorArg& t = in.tensors.at(x.slot);
    auto& B = e.b;
    Value* idx = e.c64(0);
    for (size_t i = 0; i < x.args.size(); ++i) {
      idx = B.CreateMul(idx, B.CreateSExt(t.extents[i], e.i64()));
      idx = B.CreateAdd(idx, B.CreateSExt(lower(*x.args[i]), e.i64()));
    }
    llvm::Type* elem = t.elem == Type::F32 ? e.f32() : e.i32();
    llvm::LoadInst* load = B.CreateAlignedLoad(elem, B.CreateGEP(elem, t.ptr, idx), llvm::Align(4));
    // Spec tensors are inputs no kernel writes: invariant for the launch, so LLVM may merge the
    // reads across the kv loop's barriers and asm, and NVPTX reads them through the
    // non-coherent path (ld.global.nc, PTX ISA §9.7.9.8).
    load->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(e.ctx, {}));
    return load;
  }

  Value* lower(const Expr& x) {
    auto& B = e.b;
    switch (x.kind) {
      case ExprKind::IntLit: return e.c32(x.int_value);
      case ExprKind::FloatLit: return e.cf(x.float_value);
      case ExprKind::BoolLit: return B.getInt1(x.bool_value);
      case ExprKind::Var:
        switch (x.var) {
          case dsl::Builtin::B: return in.b;
          case dsl::Builtin::H: return in.h;
          case dsl::Builtin::HKv: return in.h_kv;
          case dsl::Builtin::Q: return in.q;
          case dsl::Builtin::Kv: return in.kv;
          case dsl::Builtin::SeqQ: return in.seq_q;
          case dsl::Builtin::SeqKv: return in.seq_kv;
          case dsl::Builtin::Score:
            if (!in.score) bug("`score` outside a score expression");
            return in.score;
        }
        bug("builtin");
      case ExprKind::Param: return in.params.at(x.slot);
      case ExprKind::TensorRead: return tensor_read(x);
      case ExprKind::Unary: {
        Value* a = lower(*x.args[0]);
        if (x.un == dsl::UnOp::Not) return B.CreateNot(a);
        return x.type == Type::F32 ? B.CreateFNeg(a) : B.CreateNeg(a);
      }
      case ExprKind::Binary: return binary(x);
      case ExprKind::Select: return select(x, lower(*x.args[0]), lower(*x.args[1]), lower(*x.args[2]));
      case ExprKind::Call: return call(x);
      case ExprKind::Shorthand: bug("an undesugared mask shorthand");
    }
    bug("expression");
  }
};

}  // namespace

llvm::Value* lower_expr(tile::Emitter& em, const dsl::Expr& e, const ExprInputs& in) {
  Lowerer l{em, in};
  return l.lower(e);
}

}  // namespace flashjit

#include "tests/internal/ir_eval.hpp"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/Support/raw_ostream.h>

#include <stdexcept>

namespace flashjit::test {

namespace {

using llvm::APInt;

[[noreturn]] void unsupported(llvm::Value* v) {
  std::string text;
  llvm::raw_string_ostream os(text);
  v->print(os);
  throw std::runtime_error("IrEval cannot evaluate: " + os.str());
}

APInt binary(unsigned op, const APInt& a, const APInt& b, llvm::Value* v) {
  switch (op) {
    case llvm::Instruction::Add: return a + b;
    case llvm::Instruction::Sub: return a - b;
    case llvm::Instruction::Mul: return a * b;
    case llvm::Instruction::SDiv: return a.sdiv(b);
    case llvm::Instruction::UDiv: return a.udiv(b);
    case llvm::Instruction::SRem: return a.srem(b);
    case llvm::Instruction::URem: return a.urem(b);
    case llvm::Instruction::Shl: return a.shl(b);
    case llvm::Instruction::LShr: return a.lshr(b);
    case llvm::Instruction::AShr: return a.ashr(b);
    case llvm::Instruction::And: return a & b;
    case llvm::Instruction::Or: return a | b;
    case llvm::Instruction::Xor: return a ^ b;
    default: unsupported(v);
  }
}

}  // namespace

void IrEval::bind(llvm::Value* v, int64_t x) {
  known_.insert_or_assign(v, APInt(v->getType()->getIntegerBitWidth(), static_cast<uint64_t>(x), /*isSigned=*/true));
}

APInt IrEval::eval(llvm::Value* v) {
  if (auto it = known_.find(v); it != known_.end()) return it->second;
  APInt r;
  if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(v)) {
    r = c->getValue();
  } else if (auto* b = llvm::dyn_cast<llvm::BinaryOperator>(v)) {
    r = binary(b->getOpcode(), eval(b->getOperand(0)), eval(b->getOperand(1)), v);
  } else if (auto* c = llvm::dyn_cast<llvm::ICmpInst>(v)) {
    r = APInt(1, llvm::ICmpInst::compare(eval(c->getOperand(0)), eval(c->getOperand(1)), c->getPredicate()));
  } else if (auto* s = llvm::dyn_cast<llvm::SelectInst>(v)) {
    r = eval(s->getCondition()).getBoolValue() ? eval(s->getTrueValue()) : eval(s->getFalseValue());
  } else if (auto* c = llvm::dyn_cast<llvm::CastInst>(v)) {
    const unsigned to = v->getType()->getIntegerBitWidth();
    const APInt x = eval(c->getOperand(0));
    if (llvm::isa<llvm::SExtInst>(c)) r = x.sext(to);
    else if (llvm::isa<llvm::ZExtInst>(c)) r = x.zext(to);
    else if (llvm::isa<llvm::TruncInst>(c)) r = x.trunc(to);
    else unsupported(v);
  } else if (auto* i = llvm::dyn_cast<llvm::IntrinsicInst>(v)) {
    const APInt a = eval(i->getArgOperand(0)), b = eval(i->getArgOperand(1));
    switch (i->getIntrinsicID()) {
      case llvm::Intrinsic::smin: r = a.slt(b) ? a : b; break;
      case llvm::Intrinsic::smax: r = a.sgt(b) ? a : b; break;
      case llvm::Intrinsic::umin: r = a.ult(b) ? a : b; break;
      case llvm::Intrinsic::umax: r = a.ugt(b) ? a : b; break;
      default: unsupported(v);
    }
  } else {
    unsupported(v);
  }
  known_.emplace(v, r);
  return r;
}

}  // namespace flashjit::test

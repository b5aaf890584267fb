#include "compiler/tile/inline_ptx.hpp"

#include <llvm/IR/InlineAsm.h>

namespace flashjit::tile {

llvm::CallInst* inline_ptx(Emitter& e, llvm::Type* ret, const std::vector<llvm::Value*>& args, const std::string& text,
                           const std::string& constraints, bool side_effects) {
  std::vector<llvm::Type*> types;
  for (llvm::Value* a : args) types.push_back(a->getType());
  auto* fn = llvm::FunctionType::get(ret, types, false);
  return e.b.CreateCall(llvm::InlineAsm::get(fn, text, constraints, side_effects), args);
}

}  // namespace flashjit::tile

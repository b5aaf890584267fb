#include "compiler/tile/emitter.hpp"

namespace flashjit::tile {

llvm::AllocaInst* Emitter::var(llvm::Type* type, const char* name, llvm::Value* init) {
  llvm::IRBuilder<> entry(&fn->getEntryBlock(), fn->getEntryBlock().begin());
  llvm::AllocaInst* slot = entry.CreateAlloca(type, nullptr, name);
  if (init) b.CreateStore(init, slot);
  return slot;
}

}  // namespace flashjit::tile

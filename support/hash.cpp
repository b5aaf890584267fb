#include "support/hash.hpp"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/SHA256.h>

namespace flashjit {

std::string sha256_hex(std::string_view data) {
  return llvm::toHex(llvm::SHA256::hash(llvm::arrayRefFromStringRef(llvm::StringRef(data))), /*LowerCase=*/true);
}

}  // namespace flashjit

// The one hash for keys and content-addressed names: SHA-256 (FIPS 180-4) through llvm::SHA256.
// Collisions must not happen where these names pick a cached file; callers that want a shorter
// name take a prefix of the hex text.
#pragma once

#include <string>
#include <string_view>

namespace flashjit {

// The SHA-256 digest of `data` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace flashjit

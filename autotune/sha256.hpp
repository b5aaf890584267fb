// SHA-256 (FIPS 180-4), for content-addressed cache names where collisions must not happen.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace flashjit::autotune {

// The 32-byte digest of `data`.
std::array<uint8_t, 32> sha256(std::string_view data);
// The digest as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace flashjit::autotune

// Helpers shared by the C ABI tests (tests/test_capi*.cpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "flashjit/flashjit.h"
#include "flashjit/flashjit.hpp"

namespace flashjit::test {

// Random bf16 bits from N(0, 1) (round to nearest even).
inline std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<uint16_t> out(n);
  for (auto& x : out) {
    float f = dist(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u += 0x7FFF + ((u >> 16) & 1);
    x = static_cast<uint16_t>(u >> 16);
  }
  return out;
}

inline fj_tensor to_c(const Tensor& t) {
  fj_tensor c;
  c.data = t.data;
  for (int i = 0; i < 4; ++i) c.stride[i] = t.stride[i];
  return c;
}

// A C runtime and kernel, destroyed in either order (the ABI allows both).
struct CapiGpu {
  fj_runtime* crt = nullptr;
  fj_kernel* ckernel = nullptr;
  CapiGpu() = default;
  CapiGpu(const CapiGpu&) = delete;
  CapiGpu& operator=(const CapiGpu&) = delete;
  ~CapiGpu() {
    fj_kernel_destroy(ckernel);
    fj_runtime_destroy(crt);
  }
};

}  // namespace flashjit::test

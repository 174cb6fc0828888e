// Deterministic pseudo-random values, the same bits on the host and on a
// CUDA device: value i of a fill with `seed` depends only on (seed, i), so a
// synthetic model has the same weights on every backend and for every
// thread or block partition (the CPU-vs-CUDA tests compare them).
#ifndef TRIBUTARY_ENGINE_BACKEND_RANDOM_FILL_H_
#define TRIBUTARY_ENGINE_BACKEND_RANDOM_FILL_H_

#include <cstdint>

#include "engine/backend/host_device.h"

namespace tributary {

// SplitMix64's finaliser: a bijection of 64-bit words whose outputs pass
// BigCrush for consecutive inputs.
TRIBUTARY_HOST_DEVICE inline uint64_t MixBits64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Value `index` of the fill `seed`, uniform in [low, high). u has 24 random
// bits (exact in f32); the multiply and the add are rounded separately on
// both sides (no fused multiply-add), so host and device agree bit for bit.
TRIBUTARY_HOST_DEVICE inline float RandomUniform(uint64_t seed, uint64_t index,
                                                 float low, float high) {
  const uint64_t bits = MixBits64(seed ^ MixBits64(index));
  const float u = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
#if defined(__CUDA_ARCH__)
  return __fadd_rn(low, __fmul_rn(high - low, u));
#else
  volatile float scaled = (high - low) * u;  // keeps the compiler from fusing
  return low + scaled;
#endif
}

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_RANDOM_FILL_H_

#include "engine/sampling/philox.h"

#include <cstdint>

namespace tributary {
namespace {

constexpr uint32_t kMultiplier0 = 0xD2511F53u;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

PhiloxCounter Round(const PhiloxCounter& c, const PhiloxKey& k) {
  const uint64_t product0 = static_cast<uint64_t>(kMultiplier0) * c[0];
  const uint64_t product1 = static_cast<uint64_t>(kMultiplier1) * c[2];
  const uint32_t hi0 = static_cast<uint32_t>(product0 >> 32);
  const uint32_t lo0 = static_cast<uint32_t>(product0);
  const uint32_t hi1 = static_cast<uint32_t>(product1 >> 32);
  const uint32_t lo1 = static_cast<uint32_t>(product1);
  return {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
}

}  // namespace

PhiloxCounter Philox4x32(PhiloxCounter counter, PhiloxKey key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kWeyl0;
      key[1] += kWeyl1;
    }
    counter = Round(counter, key);
  }
  return counter;
}

double UniformForToken(uint64_t seed, uint64_t token_index, uint32_t draw) {
  const PhiloxCounter out = Philox4x32(
      {static_cast<uint32_t>(token_index),
       static_cast<uint32_t>(token_index >> 32), draw, 0u},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  const uint64_t bits = (static_cast<uint64_t>(out[0]) << 32) | out[1];
  // The top 53 bits, scaled by 2^-53: exactly representable, never 1.0.
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace tributary

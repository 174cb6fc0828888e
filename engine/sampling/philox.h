// A counter-based random generator (Philox4x32-10, Salmon et al., SC'11; the
// generator of cuRAND and PyTorch's CUDA RNG). A counter-based generator has
// no state to carry: the output is a pure function of (key, counter), so the
// draw for a sequence's generated token i is a function of (seed, i) alone.
// That is what makes a seeded request reproducible whatever batch it lands
// in, whatever other requests were sampled in between, and across preemption
// by recompute.
//
// All functions are pure and thread-safe.
#ifndef TRIBUTARY_ENGINE_SAMPLING_PHILOX_H_
#define TRIBUTARY_ENGINE_SAMPLING_PHILOX_H_

#include <array>
#include <cstdint>

namespace tributary {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten rounds of Philox4x32 (the Random123 reference, checked against its
// known-answer vectors in the tests).
PhiloxCounter Philox4x32(PhiloxCounter counter, PhiloxKey key);

// A uniform double in [0, 1) with 53 random bits for generated token
// `token_index` of a sequence sampled with `seed`. `draw` numbers the
// independent draws one token may need (the sampler uses draw 0).
double UniformForToken(uint64_t seed, uint64_t token_index, uint32_t draw = 0);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SAMPLING_PHILOX_H_

// Chooses one sequence's next token from its logits row; called by the engine
// loop per sequence per step.
//
// Processing order (HF's LogitsProcessor order; vLLM agrees on penalties
// first and temperature before truncation, but runs min-p before top-k/top-p):
//   penalties (logits_penalizer.h) -> temperature -> top-k -> top-p -> min-p
//   -> draw (candidate_list.h).
// Greedy (temperature < SamplingParams::kGreedyTemperature) is the argmax of
// the penalized logits, ties to the lowest id; truncation cannot change the
// argmax, so it is skipped.
//
// Randomness: the draw for generated token i is UniformForToken(seed, i)
// (philox.h), a pure function of (seed, i). Nothing is shared between
// sequences, so a seeded request gives the same tokens whatever batch it is
// in, in whatever order the engine samples its sequences, and after
// preemption by recompute. See EffectiveSeed for unseeded requests. The
// draw is mapped to a token by walking the surviving candidates in id order
// (candidate_list.h, the canonical rule), so the token for a given (seed, i)
// depends only on the logits and the settings: a backend that samples on
// the device (Backend::ChooseTokens) follows the same rule and gives the
// same token, up to the rounding of sums taken in another order.
//
// Logprobs are of the raw distribution (logprobs.h), unaffected by penalties,
// temperature and truncation.
//
// Not thread-safe (scratch buffers of vocabulary size, kept between calls to
// avoid allocating per token); one Sampler per engine thread.
#ifndef TRIBUTARY_ENGINE_SAMPLING_SAMPLER_H_
#define TRIBUTARY_ENGINE_SAMPLING_SAMPLER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/sampling/candidate_list.h"
#include "engine/sampling/logits_penalizer.h"
#include "engine/sampling/logprobs.h"
#include "engine/sampling/sampling_params.h"
#include "engine/sampling/token_history.h"

namespace tributary {

// The seed a request samples with for its whole life: its own when it set
// one, otherwise `fresh_seed`, which the engine draws once per request when it
// is submitted (from its own generator, e.g. a std::mt19937_64 seeded from
// std::random_device at start; no global RNG). Storing the result with the
// sequence keeps an unseeded request consistent across preemption.
inline uint64_t EffectiveSeed(const SamplingParams& params,
                              uint64_t fresh_seed) {
  return params.seed.value_or(fresh_seed);
}

struct SampleResult {
  int32_t token_id = -1;
  // Set when params.num_logprobs is set: the chosen token's raw logprob.
  std::optional<float> logprob;
  // The params.num_logprobs most likely tokens of the raw distribution, most
  // likely first, ties to the lower id.
  std::vector<TokenLogprob> top_logprobs;
};

class Sampler {
 public:
  // `logits` [vocab_size]: the model's raw row for this sequence. `params`
  // must have passed Validate() (not re-checked per token). `seed`: the
  // sequence's EffectiveSeed; the draw uses index history.output_ids.size().
  // Errors: Internal naming the id and value when a logit is not finite (a
  // numerical bug upstream; design.md §6 maps it to INTERNAL);
  // InvalidArgument when `logits` is empty or, with penalties on, a history
  // id is outside the vocabulary.
  // Cost: O(vocab) (one pass for greedy without penalties or logprobs); the
  // vocabulary is never fully sorted unless top-p needs every token.
  absl::StatusOr<SampleResult> Sample(absl::Span<const float> logits,
                                      const SamplingParams& params,
                                      const TokenHistory& history,
                                      uint64_t seed);

 private:
  LogitsPenalizer penalizer_;
  CandidateList candidates_;
  std::vector<float> penalized_;  // [vocab_size], only with penalties
};

// The lowest id among the largest values of `logits` (non-empty, finite).
int32_t Argmax(absl::Span<const float> logits);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SAMPLING_SAMPLER_H_

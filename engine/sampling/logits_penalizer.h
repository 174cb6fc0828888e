// Repetition, presence and frequency penalties on one logits row.
//
// Order (vLLM's, a superset of HF's which has only the first):
//  1. repetition_penalty r, once per distinct token of prompt + output
//     (CTRL, Keskar et al. 2019, as HF RepetitionPenaltyLogitsProcessor):
//     logit > 0 ? logit / r : logit * r, so r > 1 always makes it less likely;
//  2. presence p and frequency f over the output only (OpenAI):
//     logit -= p + f * count(token in output), for tokens with count > 0.
// Results are clamped to the finite float range, so that a huge logit divided
// by a small penalty cannot become inf and poison later arithmetic.
//
// Cost: O(prompt + output) per call, independent of the vocabulary, using a
// vocabulary-sized scratch array that is all zero between calls.
// Not thread-safe (the scratch); one per engine thread.
#ifndef TRIBUTARY_ENGINE_SAMPLING_LOGITS_PENALIZER_H_
#define TRIBUTARY_ENGINE_SAMPLING_LOGITS_PENALIZER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/sampling/sampling_params.h"
#include "engine/sampling/token_history.h"

namespace tributary {

class LogitsPenalizer {
 public:
  // Penalizes `logits` [vocab_size] in place. InvalidArgument naming the list
  // and index when a history id is outside [0, vocab_size) (then `logits` is
  // unchanged). `params` must be valid.
  absl::Status Apply(const SamplingParams& params, const TokenHistory& history,
                     absl::Span<float> logits);

 private:
  // scratch_[id] == 0 for every id between calls.
  std::vector<int32_t> scratch_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SAMPLING_LOGITS_PENALIZER_H_

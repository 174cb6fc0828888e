// Log-probabilities of the model's raw distribution: log_softmax of the
// logits as the model produced them, before penalties, temperature and
// truncation (design.md §6; vLLM's default "raw_logprobs").
//
// Pure functions; thread-safe.
#ifndef TRIBUTARY_ENGINE_SAMPLING_LOGPROBS_H_
#define TRIBUTARY_ENGINE_SAMPLING_LOGPROBS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace tributary {

struct TokenLogprob {
  int32_t token_id = -1;
  float logprob = 0.0f;  // natural log
};

// log(sum(exp(logits))), computed stably in double. `logits` [vocab] must be
// finite and non-empty. O(vocab).
double LogSumExp(absl::Span<const float> logits);

// The `n` largest logits as logprobs (logit - log_sum_exp), most likely first,
// ties to the lower id. min(n, vocab) entries. O(vocab * log n): a bounded
// heap, no sort of the vocabulary.
std::vector<TokenLogprob> TopLogprobs(absl::Span<const float> logits,
                                      double log_sum_exp, int32_t n);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SAMPLING_LOGPROBS_H_

// The token ids a sequence has seen, as the sampler needs them.
#ifndef TRIBUTARY_ENGINE_SAMPLING_TOKEN_HISTORY_H_
#define TRIBUTARY_ENGINE_SAMPLING_TOKEN_HISTORY_H_

#include <cstdint>

#include "absl/types/span.h"

namespace tributary {

// Views owned by the caller; they must outlive the call they are passed to.
struct TokenHistory {
  absl::Span<const int32_t> prompt_ids;
  // The tokens generated so far. The token being sampled has index
  // output_ids.size(), which keys its random draw.
  absl::Span<const int32_t> output_ids;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SAMPLING_TOKEN_HISTORY_H_

// Why a sequence stopped generating.
#ifndef TRIBUTARY_ENGINE_SAMPLING_FINISH_REASON_H_
#define TRIBUTARY_ENGINE_SAMPLING_FINISH_REASON_H_

#include "absl/strings/string_view.h"

namespace tributary {

enum class FinishReason {
  kLength,      // max_new_tokens (or the context) reached
  kStop,        // the model's EOS token (one of its generation-config ids)
  kStopToken,   // one of the request's stop_token_ids
  kStopString,  // one of the request's stop_strings
  kCancelled,   // cancelled by the client or a deadline (set by the engine)
};

// "length", "stop", "stop_token", "stop_string", "cancelled".
absl::string_view FinishReasonName(FinishReason reason);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SAMPLING_FINISH_REASON_H_

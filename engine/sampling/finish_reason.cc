#include "engine/sampling/finish_reason.h"

namespace tributary {

absl::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kStopToken:
      return "stop_token";
    case FinishReason::kStopString:
      return "stop_string";
    case FinishReason::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

}  // namespace tributary

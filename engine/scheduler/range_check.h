// The scheduler's configs check every integer field against a range with
// one message shape, "field = value must be in [min, max]".
#ifndef TRIBUTARY_ENGINE_SCHEDULER_RANGE_CHECK_H_
#define TRIBUTARY_ENGINE_SCHEDULER_RANGE_CHECK_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tributary {

inline absl::Status CheckRange(const char* field, int64_t value, int64_t min,
                               int64_t max) {
  if (value < min || value > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " = ", value, " must be in [", min, ", ", max, "]"));
  }
  return absl::OkStatus();
}

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SCHEDULER_RANGE_CHECK_H_

#include "server/slow_reader_policy.h"

#include "absl/strings/str_cat.h"

namespace tributary {

bool SlowReaderPolicy::CutsOff(int64_t pending_tokens,
                               std::optional<absl::Time> write_started,
                               absl::Time now) const {
  return pending_tokens > max_pending_tokens ||
         (write_started.has_value() &&
          now - *write_started > max_write_pending);
}

std::string SlowReaderPolicy::Message() const {
  return absl::StrCat(
      "the client stopped reading: more than ", max_pending_tokens,
      " tokens waited for it, or one write was pending for over ",
      absl::FormatDuration(max_write_pending));
}

}  // namespace tributary

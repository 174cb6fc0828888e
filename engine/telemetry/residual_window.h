// The residual statistics of the recent past, for GetResidualStats
// (design.md §4): a ring of time buckets, each a ResidualSummary, so that
// memory is bounded (num_buckets summaries) whatever the traffic. A query
// for the last W seconds merges the buckets that overlap [now - W, now], so
// it covers between W and W + one bucket width.
//
// Thread-safe: the engine thread adds, RPC threads query. The clock is a
// parameter, so tests need no sleeping.
#ifndef TRIBUTARY_ENGINE_TELEMETRY_RESIDUAL_WINDOW_H_
#define TRIBUTARY_ENGINE_TELEMETRY_RESIDUAL_WINDOW_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/telemetry/residual_summary.h"

namespace tributary {

struct ResidualWindowOptions {
  int num_layers = 0;
  // The longest window a query may ask for.
  absl::Duration max_window = absl::Seconds(60);
  // Resolution: max_window / num_buckets.
  int num_buckets = 60;
};

class ResidualWindow {
 public:
  // INVALID_ARGUMENT for a non-positive window, bucket count or layer count.
  static absl::StatusOr<std::unique_ptr<ResidualWindow>> Create(
      const ResidualWindowOptions& options);

  void Add(const ResidualSummary& summary, absl::Time now);
  // The merge of the buckets within `window` (clamped to max_window) before
  // `now`.
  ResidualSummary Query(absl::Duration window, absl::Time now) const;

  absl::Duration max_window() const { return options_.max_window; }
  absl::Duration bucket_width() const { return bucket_width_; }

 private:
  explicit ResidualWindow(const ResidualWindowOptions& options);
  int64_t BucketIndex(absl::Time t) const;  // absolute, since the epoch

  ResidualWindowOptions options_;
  absl::Duration bucket_width_;
  mutable std::mutex mu_;
  // Ring slot i holds absolute bucket stamps_[i] (-1 = empty).
  std::vector<ResidualSummary> buckets_;
  std::vector<int64_t> stamps_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TELEMETRY_RESIDUAL_WINDOW_H_

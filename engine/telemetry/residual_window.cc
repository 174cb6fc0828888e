#include "engine/telemetry/residual_window.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tributary {

absl::StatusOr<std::unique_ptr<ResidualWindow>> ResidualWindow::Create(
    const ResidualWindowOptions& options) {
  if (options.num_layers <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("residual window: num_layers must be > 0, got ",
                     options.num_layers));
  }
  if (options.num_buckets <= 0 || options.num_buckets > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("residual window: num_buckets must be in [1, 100000], got ",
                     options.num_buckets));
  }
  if (options.max_window <= absl::ZeroDuration() ||
      options.max_window == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("residual window: max_window must be positive and finite, "
                     "got ",
                     absl::FormatDuration(options.max_window)));
  }
  return std::unique_ptr<ResidualWindow>(new ResidualWindow(options));
}

ResidualWindow::ResidualWindow(const ResidualWindowOptions& options)
    : options_(options),
      bucket_width_(options.max_window / options.num_buckets),
      buckets_(static_cast<size_t>(options.num_buckets),
               ResidualSummary(options.num_layers)),
      stamps_(static_cast<size_t>(options.num_buckets), -1) {
  if (bucket_width_ <= absl::ZeroDuration()) bucket_width_ = absl::Nanoseconds(1);
}

int64_t ResidualWindow::BucketIndex(absl::Time t) const {
  absl::Duration remainder;  // IDivDuration requires it
  return absl::IDivDuration(t - absl::UnixEpoch(), bucket_width_, &remainder);
}

void ResidualWindow::Add(const ResidualSummary& summary, absl::Time now) {
  const int64_t index = BucketIndex(now);
  const size_t slot = static_cast<size_t>(index % options_.num_buckets);
  std::lock_guard<std::mutex> lock(mu_);
  if (stamps_[slot] != index) {
    buckets_[slot].Clear();
    stamps_[slot] = index;
  }
  buckets_[slot].Merge(summary);
}

ResidualSummary ResidualWindow::Query(absl::Duration window,
                                      absl::Time now) const {
  window = std::clamp(window, absl::ZeroDuration(), options_.max_window);
  const int64_t last = BucketIndex(now);
  const int64_t first = BucketIndex(now - window);
  ResidualSummary result(options_.num_layers);
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < stamps_.size(); ++i) {
    // Buckets older than the ring are overwritten before they could match.
    if (stamps_[i] >= first && stamps_[i] <= last) result.Merge(buckets_[i]);
  }
  return result;
}

}  // namespace tributary

#include "client/latency_stats.h"

#include <algorithm>
#include <cmath>

namespace tributary {

void LatencyStats::Add(double seconds, int64_t count) {
  if (count <= 0) return;
  samples_.insert(samples_.end(), static_cast<size_t>(count), seconds);
  sum_ += seconds * static_cast<double>(count);
  sorted_ = false;
}

void LatencyStats::Merge(const LatencyStats& other) {
  samples_.insert(samples_.end(), other.samples_.begin(), other.samples_.end());
  sum_ += other.sum_;
  sorted_ = false;
}

double LatencyStats::mean() const {
  return samples_.empty() ? 0.0 : sum_ / static_cast<double>(samples_.size());
}

double LatencyStats::min() const { return Percentile(0.0); }

double LatencyStats::max() const { return Percentile(100.0); }

double LatencyStats::Percentile(double p) const {
  if (samples_.empty()) return 0.0;
  SortIfNeeded();
  p = std::clamp(p, 0.0, 100.0);
  // Rank ceil(p · n / 100), at least 1: p50 of {1, 2, 3, 4} is 2, p100 the
  // max, p0 the min. No interpolation: every reported value is a real sample.
  // p · n first: 0.9 · 100 is 90.000…01 in doubles, 90 · 100 / 100 is 90.
  const double rank =
      std::ceil(p * static_cast<double>(samples_.size()) / 100.0);
  const size_t index = static_cast<size_t>(std::max(1.0, rank)) - 1;
  return samples_[std::min(index, samples_.size() - 1)];
}

void LatencyStats::SortIfNeeded() const {
  if (sorted_) return;
  std::sort(samples_.begin(), samples_.end());
  sorted_ = true;
}

}  // namespace tributary

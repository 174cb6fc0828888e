// A bag of latency samples (seconds) and their summary: count, mean and
// nearest-rank percentiles, the same definition tributary-bench uses so that
// the numbers of the two tools compare.
#ifndef TRIBUTARY_CLIENT_LATENCY_STATS_H_
#define TRIBUTARY_CLIENT_LATENCY_STATS_H_

#include <cstdint>
#include <vector>

namespace tributary {

class LatencyStats {
 public:
  // Adds `count` samples of the same value (an inter-token latency is one
  // sample per token of the message that carried it).
  void Add(double seconds, int64_t count = 1);
  void Merge(const LatencyStats& other);

  int64_t count() const { return static_cast<int64_t>(samples_.size()); }
  // 0 when empty.
  double mean() const;
  double min() const;
  double max() const;
  // Nearest rank: the smallest sample with at least p % of the samples at or
  // below it; p in [0, 100] (clamped). 0 when empty. Sorts on first use
  // after an Add, so a summary costs one sort.
  double Percentile(double p) const;

 private:
  void SortIfNeeded() const;

  mutable std::vector<double> samples_;
  mutable bool sorted_ = true;
  double sum_ = 0.0;
};

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_LATENCY_STATS_H_

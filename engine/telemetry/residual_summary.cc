#include "engine/telemetry/residual_summary.h"

#include <algorithm>
#include <cmath>

#include "engine/backend/backend.h"

namespace tributary {

const std::array<double, kNumRatioBounds>& RatioBucketBounds() {
  static const std::array<double, kNumRatioBounds> bounds = [] {
    std::array<double, kNumRatioBounds> b{};
    // 10^(-4 + i/2): exact powers of ten at even i.
    for (int i = 0; i < kNumRatioBounds; ++i) {
      b[static_cast<size_t>(i)] = std::pow(10.0, -4.0 + 0.5 * i);
    }
    return b;
  }();
  return bounds;
}

const char* SublayerName(Sublayer s) {
  return s == Sublayer::kMixer ? "mixer" : "ffn";
}

void SublayerAccumulator::AddToken(absl::Span<const float> row) {
  const float stream = row[kStatStreamNorm];
  const float update = row[kStatUpdateNorm];
  const float sum = row[kStatSumNorm];
  const float max_abs_y = row[kStatMaxAbs];
  if (row[kStatNonFinite] != 0.0f || !std::isfinite(stream) ||
      !std::isfinite(update) || !std::isfinite(sum)) {
    ++num_nonfinite;
    return;
  }
  const float ratio = update / std::max(stream, kMinStreamNorm);
  ++num_tokens;
  sum_stream_norm += stream;
  sum_update_norm += update;
  sum_sum_norm += sum;
  sum_ratio += ratio;
  max_stream_norm = std::max(max_stream_norm, stream);
  max_update_norm = std::max(max_update_norm, update);
  max_sum_norm = std::max(max_sum_norm, sum);
  max_ratio = std::max(max_ratio, ratio);
  if (max_abs_dim < 0 || max_abs_y > max_abs) {
    max_abs = max_abs_y;
    max_abs_dim = static_cast<int32_t>(row[kStatMaxAbsDim]);
  }
  const auto& bounds = RatioBucketBounds();
  const size_t bucket = static_cast<size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), static_cast<double>(ratio)) -
      bounds.begin());
  ++ratio_buckets[bucket];
}

void SublayerAccumulator::Merge(const SublayerAccumulator& o) {
  num_tokens += o.num_tokens;
  num_nonfinite += o.num_nonfinite;
  sum_stream_norm += o.sum_stream_norm;
  sum_update_norm += o.sum_update_norm;
  sum_sum_norm += o.sum_sum_norm;
  sum_ratio += o.sum_ratio;
  max_stream_norm = std::max(max_stream_norm, o.max_stream_norm);
  max_update_norm = std::max(max_update_norm, o.max_update_norm);
  max_sum_norm = std::max(max_sum_norm, o.max_sum_norm);
  max_ratio = std::max(max_ratio, o.max_ratio);
  if (o.max_abs_dim >= 0 && (max_abs_dim < 0 || o.max_abs > max_abs)) {
    max_abs = o.max_abs;
    max_abs_dim = o.max_abs_dim;
  }
  for (size_t i = 0; i < ratio_buckets.size(); ++i) {
    ratio_buckets[i] += o.ratio_buckets[i];
  }
}

int64_t ResidualSummary::TotalTokens() const {
  int64_t n = 0;
  for (const SublayerAccumulator& a : sublayers) {
    n += a.num_tokens + a.num_nonfinite;
  }
  return n;
}

void ResidualSummary::AddStep(absl::Span<const float> stats,
                              absl::Span<const float> final_norms,
                              int64_t num_tokens, int64_t token_begin,
                              int64_t token_end) {
  const size_t cols = kResidualStatsColumns;
  const size_t per_sublayer = static_cast<size_t>(num_tokens) * cols;
  if (stats.size() >= sublayers.size() * per_sublayer) {
    for (size_t s = 0; s < sublayers.size(); ++s) {
      for (int64_t t = token_begin; t < token_end; ++t) {
        sublayers[s].AddToken(
            stats.subspan(s * per_sublayer + static_cast<size_t>(t) * cols, cols));
      }
    }
  }
  if (final_norms.size() >= static_cast<size_t>(num_tokens)) {
    for (int64_t t = token_begin; t < token_end; ++t) {
      const float norm = final_norms[static_cast<size_t>(t)];
      if (!std::isfinite(norm)) continue;
      ++num_final_tokens;
      sum_final_stream_norm += norm;
      max_final_stream_norm = std::max(max_final_stream_norm, norm);
    }
  }
}

void ResidualSummary::Merge(const ResidualSummary& other) {
  if (sublayers.empty()) sublayers.resize(other.sublayers.size());
  const size_t n = std::min(sublayers.size(), other.sublayers.size());
  for (size_t i = 0; i < n; ++i) sublayers[i].Merge(other.sublayers[i]);
  num_final_tokens += other.num_final_tokens;
  sum_final_stream_norm += other.sum_final_stream_norm;
  max_final_stream_norm =
      std::max(max_final_stream_norm, other.max_final_stream_norm);
}

void ResidualSummary::Clear() {
  for (SublayerAccumulator& a : sublayers) a = SublayerAccumulator();
  num_final_tokens = 0;
  sum_final_stream_norm = 0.0;
  max_final_stream_norm = 0.0f;
}

}  // namespace tributary

// Aggregation of the residual-stream statistics (design.md §4). The forward
// pass produces, per token and per sublayer, ‖x‖, ‖u‖, ‖x + u‖, max |x + u|
// with its dimension, and a non-finite flag (backend.h, ResidualStatsColumn).
// This file turns those rows into per-(layer, sublayer) sums and maxima that
// merge: one step's summary, a request's, a time window's.
//
// Aggregates over tokens are means of per-token values (a mean of ratios,
// not a ratio of means). A token whose update or sum is non-finite is only
// counted in num_nonfinite: a single NaN must not poison a cumulative sum
// that Prometheus exports forever.
#ifndef TRIBUTARY_ENGINE_TELEMETRY_RESIDUAL_SUMMARY_H_
#define TRIBUTARY_ENGINE_TELEMETRY_RESIDUAL_SUMMARY_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace tributary {

// ratio = ‖u‖ / max(‖x‖, kMinStreamNorm): a zero stream is possible (an
// embedding row that was never trained).
inline constexpr float kMinStreamNorm = 1e-12f;

// Upper bounds of the ratio histogram: 1e-4 … 1e2 at two per decade (13
// bounds; a 14th bucket holds everything above 1e2).
inline constexpr int kNumRatioBounds = 13;
const std::array<double, kNumRatioBounds>& RatioBucketBounds();

enum class Sublayer : int { kMixer = 0, kFfn = 1 };
const char* SublayerName(Sublayer s);  // "mixer", "ffn"

// The statistics of one (layer, sublayer) over a set of tokens.
struct SublayerAccumulator {
  int64_t num_tokens = 0;     // finite tokens (in the sums)
  int64_t num_nonfinite = 0;  // tokens with a NaN/Inf in u or x + u
  double sum_stream_norm = 0.0;
  double sum_update_norm = 0.0;
  double sum_sum_norm = 0.0;
  double sum_ratio = 0.0;
  float max_stream_norm = 0.0f;
  float max_update_norm = 0.0f;
  float max_sum_norm = 0.0f;
  float max_ratio = 0.0f;
  // The largest |y| seen and its dimension (-1 before any token).
  float max_abs = 0.0f;
  int32_t max_abs_dim = -1;
  // Ratio histogram, non-cumulative: bucket i counts ratios <= bound i and
  // above bound i-1; the last bucket counts ratios above the last bound.
  std::array<int64_t, kNumRatioBounds + 1> ratio_buckets{};

  // One token's row of kResidualStatsColumns values.
  void AddToken(absl::Span<const float> row);
  void Merge(const SublayerAccumulator& other);

  double mean_stream_norm() const { return Mean(sum_stream_norm); }
  double mean_update_norm() const { return Mean(sum_update_norm); }
  double mean_sum_norm() const { return Mean(sum_sum_norm); }
  double mean_ratio() const { return Mean(sum_ratio); }

 private:
  double Mean(double sum) const {
    return num_tokens > 0 ? sum / static_cast<double>(num_tokens) : 0.0;
  }
};

// Per (layer, sublayer) accumulators plus the final stream norm.
struct ResidualSummary {
  // Index 2 * layer + sublayer (the layout of ForwardOutput::residual_stats).
  std::vector<SublayerAccumulator> sublayers;
  // ‖x‖ entering the final norm (finite tokens only).
  int64_t num_final_tokens = 0;
  double sum_final_stream_norm = 0.0;
  float max_final_stream_norm = 0.0f;

  explicit ResidualSummary(int num_layers = 0)
      : sublayers(2 * static_cast<size_t>(num_layers)) {}
  int num_layers() const { return static_cast<int>(sublayers.size() / 2); }
  const SublayerAccumulator& at(int layer, Sublayer s) const {
    return sublayers[2 * static_cast<size_t>(layer) + static_cast<int>(s)];
  }
  bool empty() const { return num_final_tokens == 0 && TotalTokens() == 0; }
  int64_t TotalTokens() const;

  // Adds tokens [token_begin, token_end) of one step's statistics:
  // `stats` [2 * num_layers, num_tokens, kResidualStatsColumns] and
  // `final_norms` [num_tokens] as HybridDecoder::Forward returns them.
  void AddStep(absl::Span<const float> stats,
               absl::Span<const float> final_norms, int64_t num_tokens,
               int64_t token_begin, int64_t token_end);
  // Merges a summary of the same model (same number of layers).
  void Merge(const ResidualSummary& other);
  void Clear();
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TELEMETRY_RESIDUAL_SUMMARY_H_

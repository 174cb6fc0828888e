// The residual-health series of design.md §5, as one prometheus-cpp
// Collectable. The engine reports one ResidualSummary per step; this class
// merges it into cumulative per-(layer, sublayer) sums under a mutex (2L
// small merges per step, whatever the number of tokens) and renders the
// series at scrape time:
//   tributary_residual_{update_to_stream_ratio,stream_norm,update_norm,
//     sum_norm}{layer,sublayer,kind}      summaries without quantiles
//   tributary_residual_final_stream_norm   summary, no labels
//   tributary_residual_update_to_stream_ratio_distribution{sublayer,kind}
//                                          histogram, 1e-4 … 1e2, 2/decade
//   tributary_residual_nonfinite_total{layer,sublayer}
//   tributary_residual_max_abs_activation{layer,sublayer}  the last step's
// Prometheus' own Summary would take one Observe (and a lock) per token and
// sublayer; a custom collectable takes one merge per step instead.
#ifndef TRIBUTARY_SERVER_RESIDUAL_METRICS_H_
#define TRIBUTARY_SERVER_RESIDUAL_METRICS_H_

#include <mutex>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/telemetry/residual_summary.h"
#include "prometheus/client_metric.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"

namespace tributary {

class ResidualMetrics : public prometheus::Collectable {
 public:
  explicit ResidualMetrics(const ModelConfig& config);

  // Called on the engine thread once per step: the step's plain tokens, and
  // how many of its tokens were left out for changing the stream.
  void Add(const ResidualSummary& step, int64_t num_intervened_tokens);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::vector<LayerKind> kinds_;
  mutable std::mutex mu_;
  ResidualSummary total_;
  int64_t num_intervened_tokens_ = 0;
  // The most recent step's max |y| per sublayer (a gauge).
  std::vector<float> last_max_abs_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_RESIDUAL_METRICS_H_

#include "server/residual_metrics.h"

#include <algorithm>
#include <limits>
#include <string>

namespace tributary {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(const char* name, const char* help, MetricType type) {
  MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

const char* KindLabel(LayerKind kind) {
  return kind == LayerKind::kFullAttention ? "full_attention"
                                           : "linear_attention";
}

}  // namespace

ResidualMetrics::ResidualMetrics(const ModelConfig& config)
    : kinds_(config.layer_types),
      total_(static_cast<int>(config.num_hidden_layers)),
      last_max_abs_(2 * static_cast<size_t>(config.num_hidden_layers), 0.0f) {
  kinds_.resize(static_cast<size_t>(config.num_hidden_layers),
                LayerKind::kLinearAttention);
}

void ResidualMetrics::Add(const ResidualSummary& step,
                          int64_t num_intervened_tokens) {
  std::lock_guard<std::mutex> lock(mu_);
  total_.Merge(step);
  num_intervened_tokens_ += num_intervened_tokens;
  const size_t n = std::min(last_max_abs_.size(), step.sublayers.size());
  for (size_t i = 0; i < n; ++i) {
    if (step.sublayers[i].num_tokens > 0) {
      last_max_abs_[i] = step.sublayers[i].max_abs;
    }
  }
}

std::vector<MetricFamily> ResidualMetrics::Collect() const {
  MetricFamily ratio = Family(
      "tributary_residual_update_to_stream_ratio",
      "Per token ||update|| / ||stream|| of each sublayer (rate(_sum) / "
      "rate(_count) is the mean ratio)",
      MetricType::Summary);
  MetricFamily stream = Family("tributary_residual_stream_norm",
                               "Per token ||x||, the stream entering the "
                               "sublayer",
                               MetricType::Summary);
  MetricFamily update = Family("tributary_residual_update_norm",
                               "Per token ||u||, the sublayer's update",
                               MetricType::Summary);
  MetricFamily sum = Family("tributary_residual_sum_norm",
                            "Per token ||x + u||, the stream after the add",
                            MetricType::Summary);
  MetricFamily final_norm = Family(
      "tributary_residual_final_stream_norm",
      "Per token ||x|| of the stream entering the final norm",
      MetricType::Summary);
  MetricFamily dist = Family(
      "tributary_residual_update_to_stream_ratio_distribution",
      "Per token update-to-stream ratios over all layers of a kind",
      MetricType::Histogram);
  MetricFamily nonfinite = Family(
      "tributary_residual_nonfinite_total",
      "Tokens whose update or sum held a NaN or an Inf", MetricType::Counter);
  MetricFamily max_abs = Family(
      "tributary_residual_max_abs_activation",
      "The largest |x + u| of the most recent step", MetricType::Gauge);
  MetricFamily intervened = Family(
      "tributary_residual_intervened_tokens_total",
      "Tokens of requests that steer, ablate or skip layers, left out of the "
      "residual series above (which read the model's own health)",
      MetricType::Counter);

  std::lock_guard<std::mutex> lock(mu_);
  // Histogram per (sublayer, kind): merged across layers.
  SublayerAccumulator by_kind[2][2];
  for (int layer = 0; layer < total_.num_layers(); ++layer) {
    const LayerKind kind = kinds_[static_cast<size_t>(layer)];
    for (Sublayer sub : {Sublayer::kMixer, Sublayer::kFfn}) {
      const SublayerAccumulator& a = total_.at(layer, sub);
      const std::string layer_label = std::to_string(layer);
      // Labels in alphabetical order, as Prometheus prints them.
      const std::vector<ClientMetric::Label> labels = {
          {"kind", KindLabel(kind)},
          {"layer", layer_label},
          {"sublayer", SublayerName(sub)}};
      auto add_summary = [&](MetricFamily& f, double s) {
        ClientMetric m;
        m.label = labels;
        m.summary.sample_count = static_cast<uint64_t>(a.num_tokens);
        m.summary.sample_sum = s;
        f.metric.push_back(std::move(m));
      };
      add_summary(ratio, a.sum_ratio);
      add_summary(stream, a.sum_stream_norm);
      add_summary(update, a.sum_update_norm);
      add_summary(sum, a.sum_sum_norm);

      const std::vector<ClientMetric::Label> short_labels = {
          {"layer", layer_label}, {"sublayer", SublayerName(sub)}};
      ClientMetric nf;
      nf.label = short_labels;
      nf.counter.value = static_cast<double>(a.num_nonfinite);
      nonfinite.metric.push_back(std::move(nf));
      ClientMetric ma;
      ma.label = short_labels;
      ma.gauge.value =
          last_max_abs_[2 * static_cast<size_t>(layer) + static_cast<size_t>(sub)];
      max_abs.metric.push_back(std::move(ma));

      by_kind[static_cast<int>(sub)][kind == LayerKind::kFullAttention ? 1 : 0]
          .Merge(a);
    }
  }
  const auto& bounds = RatioBucketBounds();
  for (Sublayer sub : {Sublayer::kMixer, Sublayer::kFfn}) {
    for (LayerKind kind : {LayerKind::kLinearAttention, LayerKind::kFullAttention}) {
      const SublayerAccumulator& a =
          by_kind[static_cast<int>(sub)][kind == LayerKind::kFullAttention ? 1 : 0];
      ClientMetric m;
      m.label = {{"kind", KindLabel(kind)}, {"sublayer", SublayerName(sub)}};
      m.histogram.sample_count = static_cast<uint64_t>(a.num_tokens);
      m.histogram.sample_sum = a.sum_ratio;
      uint64_t cumulative = 0;
      for (size_t i = 0; i < bounds.size(); ++i) {
        cumulative += static_cast<uint64_t>(a.ratio_buckets[i]);
        m.histogram.bucket.push_back({cumulative, bounds[i]});
      }
      m.histogram.bucket.push_back(
          {static_cast<uint64_t>(a.num_tokens),
           std::numeric_limits<double>::infinity()});
      dist.metric.push_back(std::move(m));
    }
  }
  ClientMetric fm;
  fm.summary.sample_count = static_cast<uint64_t>(total_.num_final_tokens);
  fm.summary.sample_sum = total_.sum_final_stream_norm;
  final_norm.metric.push_back(std::move(fm));

  std::vector<MetricFamily> out;
  out.push_back(std::move(ratio));
  out.push_back(std::move(stream));
  out.push_back(std::move(update));
  out.push_back(std::move(sum));
  out.push_back(std::move(final_norm));
  out.push_back(std::move(dist));
  out.push_back(std::move(nonfinite));
  out.push_back(std::move(max_abs));
  ClientMetric im;
  im.counter.value = static_cast<double>(num_intervened_tokens_);
  intervened.metric.push_back(std::move(im));
  out.push_back(std::move(intervened));
  return out;
}

}  // namespace tributary

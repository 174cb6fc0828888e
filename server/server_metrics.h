// The serving series of design.md §5 (prefix tributary_), registered once at
// start-up in one prometheus-cpp Registry:
//   gauges       requests_running, requests_waiting, kv_cache_usage_ratio,
//                state_slots_usage_ratio (read from the engine at scrape
//                time, so they are right when the engine is idle),
//                build_info{version,backend,model} = 1
//   counters     requests_total{finish_reason}, request_errors_total{code},
//                prompt_tokens_total, generation_tokens_total,
//                preemptions_total, http_refused_total{status}
//   histograms   time_to_first_token_seconds, inter_token_latency_seconds,
//                e2e_request_latency_seconds, request_queue_time_seconds,
//                step_duration_seconds, batch_size
// plus the residual series (residual_metrics.h). Thread-safe.
#ifndef TRIBUTARY_SERVER_SERVER_METRICS_H_
#define TRIBUTARY_SERVER_SERVER_METRICS_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/model/model_config.h"
#include "grpcpp/support/status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/residual_metrics.h"

namespace tributary {

struct ServerMetricsOptions {
  std::string version;
  std::string backend;
  std::string model;
  const ModelConfig* config = nullptr;  // not owned
  Engine::Capacity capacity;
  // The engine's current counts (for the gauges, at scrape time).
  std::function<Engine::Counts()> counts;
};

class ServerMetrics {
 public:
  explicit ServerMetrics(const ServerMetricsOptions& options);

  // From the engine thread (via the server's EngineObserver).
  void OnStep(const StepStats& stats);
  void OnResidualStats(const ResidualSummary& step,
                       int64_t num_intervened_tokens) {
    residual_->Add(step, num_intervened_tokens);
  }

  // A request that ended: OK with the engine's final event, or an error
  // (rejected at validation or failed in the engine).
  void RecordFinished(const grpc::Status& status, const TokenEvent* final_event,
                      const char* finish_reason);
  void RecordInterToken(double seconds) { inter_token_->Observe(seconds); }
  // An HTTP request the listener refused before the router saw it (a
  // head too large, a deadline, the connection cap): its HTTP status.
  void RecordHttpRefusal(int http_status);

  // Everything to register with an exposer (or to serialise in tests).
  std::vector<std::weak_ptr<prometheus::Collectable>> collectables() const;

 private:
  class EngineGauges;

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<ResidualMetrics> residual_;
  std::shared_ptr<EngineGauges> engine_gauges_;
  prometheus::Family<prometheus::Counter>* requests_total_ = nullptr;
  prometheus::Family<prometheus::Counter>* errors_total_ = nullptr;
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generation_tokens_ = nullptr;
  prometheus::Counter* preemptions_ = nullptr;
  prometheus::Family<prometheus::Counter>* http_refused_ = nullptr;
  prometheus::Histogram* ttft_ = nullptr;
  prometheus::Histogram* inter_token_ = nullptr;
  prometheus::Histogram* e2e_ = nullptr;
  prometheus::Histogram* queue_time_ = nullptr;
  prometheus::Histogram* step_duration_ = nullptr;
  prometheus::Histogram* batch_size_ = nullptr;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_SERVER_METRICS_H_

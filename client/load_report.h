// The report of tributary-load: human-readable lines, or one JSON object
// (stable keys, for bench scripts).
#ifndef TRIBUTARY_CLIENT_LOAD_REPORT_H_
#define TRIBUTARY_CLIENT_LOAD_REPORT_H_

#include <cstdint>
#include <string>

#include "client/latency_stats.h"
#include "client/load_generator.h"
#include "nlohmann/json.hpp"

namespace tributary {

// What the run was, for the reader of the report.
struct LoadDescription {
  std::string target;
  std::string model;
  std::string backend;
  // "concurrency 8", "rate 4/s poisson, max in flight 64", …
  std::string mode;
  int64_t prompt_tokens = 0;  // 0 when the prompt is text
  std::string prompt_text;    // when the prompt is text
  int64_t max_new_tokens = 0;
};

// {"count", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"}.
nlohmann::json LatencyJson(const LatencyStats& stats);

// Keys: target, model, backend, mode, prompt_tokens, prompt_text,
// max_new_tokens, num_requests (started), num_ok, errors {CODE: count},
// error_messages {CODE: first message}, wall_seconds, requests_per_second,
// generated_tokens, generated_tokens_per_second, ttft, inter_token_latency,
// end_to_end (LatencyJson each), num_delayed_starts, max_in_flight.
nlohmann::json LoadReportJson(const LoadDescription& description,
                              const LoadResult& result);

// The same as aligned "name  value" lines, latencies in ms.
std::string LoadReportText(const LoadDescription& description,
                           const LoadResult& result);

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_LOAD_REPORT_H_

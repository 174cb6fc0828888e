#include "client/load_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tributary {
namespace {

double PerSecond(double count, double seconds) {
  return seconds > 0.0 ? count / seconds : 0.0;
}

std::string LatencyLine(const LatencyStats& stats) {
  if (stats.count() == 0) return "-";
  return absl::StrFormat(
      "p50 %.2f  p90 %.2f  p99 %.2f  mean %.2f  max %.2f ms  (%d samples)",
      1e3 * stats.Percentile(50), 1e3 * stats.Percentile(90),
      1e3 * stats.Percentile(99), 1e3 * stats.mean(), 1e3 * stats.max(),
      stats.count());
}

}  // namespace

nlohmann::json LatencyJson(const LatencyStats& stats) {
  nlohmann::json out;
  out["count"] = stats.count();
  out["mean_ms"] = 1e3 * stats.mean();
  out["p50_ms"] = 1e3 * stats.Percentile(50);
  out["p90_ms"] = 1e3 * stats.Percentile(90);
  out["p99_ms"] = 1e3 * stats.Percentile(99);
  out["max_ms"] = 1e3 * stats.max();
  return out;
}

nlohmann::json LoadReportJson(const LoadDescription& description,
                              const LoadResult& result) {
  nlohmann::json out;
  out["target"] = description.target;
  out["model"] = description.model;
  out["backend"] = description.backend;
  out["mode"] = description.mode;
  out["prompt_tokens"] = description.prompt_tokens;
  out["prompt_text"] = description.prompt_text;
  out["max_new_tokens"] = description.max_new_tokens;
  out["num_requests"] = result.num_started;
  out["num_ok"] = result.num_ok;
  out["errors"] = nlohmann::json::object();
  for (const auto& [code, count] : result.errors) out["errors"][code] = count;
  out["error_messages"] = nlohmann::json::object();
  for (const auto& [code, message] : result.first_error_messages) {
    out["error_messages"][code] = message;
  }
  out["wall_seconds"] = result.wall_seconds;
  out["requests_per_second"] =
      PerSecond(static_cast<double>(result.num_ok), result.wall_seconds);
  out["generated_tokens"] = result.generated_tokens;
  out["generated_tokens_per_second"] = PerSecond(
      static_cast<double>(result.generated_tokens), result.wall_seconds);
  out["ttft"] = LatencyJson(result.time_to_first_token);
  out["inter_token_latency"] = LatencyJson(result.inter_token);
  out["end_to_end"] = LatencyJson(result.end_to_end);
  out["num_delayed_starts"] = result.num_delayed_starts;
  out["max_in_flight"] = result.max_in_flight_seen;
  return out;
}

std::string LoadReportText(const LoadDescription& description,
                           const LoadResult& result) {
  std::string out;
  auto line = [&out](absl::string_view name, const std::string& value) {
    absl::StrAppend(&out, absl::StrFormat("%-13s %s\n", name, value));
  };
  line("target", absl::StrCat(description.target, " (model ", description.model,
                              ", ", description.backend, ")"));
  line("mode", description.mode);
  line("request",
       absl::StrCat(
           description.prompt_text.empty()
               ? absl::StrCat(description.prompt_tokens,
                              " synthetic prompt tokens")
               : absl::StrCat("prompt \"", description.prompt_text, "\""),
           ", max ", description.max_new_tokens, " new tokens"));
  line("requests", absl::StrFormat("%d ok / %d total in %.2f s", result.num_ok,
                                   result.num_started, result.wall_seconds));
  line("throughput",
       absl::StrFormat(
           "%.2f requests/s, %.1f generated tokens/s (%d tokens)",
           PerSecond(static_cast<double>(result.num_ok), result.wall_seconds),
           PerSecond(static_cast<double>(result.generated_tokens),
                     result.wall_seconds),
           result.generated_tokens));
  line("TTFT", LatencyLine(result.time_to_first_token));
  line("inter-token", LatencyLine(result.inter_token));
  line("end-to-end", LatencyLine(result.end_to_end));
  if (result.num_delayed_starts > 0) {
    line("delayed", absl::StrCat(result.num_delayed_starts,
                                 " arrivals waited for --max-in-flight"));
  }
  line("max in flight", absl::StrCat(result.max_in_flight_seen));
  if (result.errors.empty()) {
    line("errors", "none");
  } else {
    for (const auto& [code, count] : result.errors) {
      auto message = result.first_error_messages.find(code);
      line("errors",
           absl::StrCat(code, " ", count,
                        message != result.first_error_messages.end() &&
                                !message->second.empty()
                            ? absl::StrCat(" (first: ", message->second, ")")
                            : ""));
    }
  }
  return out;
}

}  // namespace tributary

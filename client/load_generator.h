// A bounded load generator on GenerateStream: closed loop (a fixed number
// of streams always in flight) or open loop (requests started at a fixed
// Poisson or constant rate, with a bound on those in flight), for a number of
// requests or a duration. Measures TTFT, inter-token and end-to-end latency
// on the client, from the token ids each streamed message carries.
//
// Built on the gRPC callback API: one ClientReadReactor per call, so N
// streams in flight cost N small objects and no thread each; the driver
// thread only sleeps on a condition variable between starts (it never
// polls).
#ifndef TRIBUTARY_CLIENT_LOAD_GENERATOR_H_
#define TRIBUTARY_CLIENT_LOAD_GENERATOR_H_

#include <grpcpp/channel.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "client/channel_options.h"
#include "client/latency_stats.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

struct LoadOptions {
  // Open loop when rate_per_second > 0: starts at `rate_per_second` on
  // average, with exponential gaps (poisson) or equal ones; an arrival that
  // finds max_in_flight calls running waits for one to finish (counted in
  // LoadResult::num_delayed_starts, since the offered rate then falls).
  // Closed loop otherwise: `concurrency` calls always in flight.
  int64_t concurrency = 1;
  double rate_per_second = 0.0;
  bool poisson = true;
  int64_t max_in_flight = 256;
  // Stop starting calls after this many, or after this long (whichever comes
  // first; at least one must be set). Calls in flight then finish (bounded by
  // the per-call deadline, if any).
  std::optional<int64_t> num_requests;
  std::optional<double> duration_seconds;
  // Draws the Poisson gaps.
  uint64_t seed = 1;
  // Metadata and per-call deadline of every call.
  ChannelOptions call_options;

  absl::Status Validate() const;
};

struct LoadResult {
  int64_t num_started = 0;
  int64_t num_ok = 0;
  // First start to last completion.
  double wall_seconds = 0.0;
  // Token ids received, in every call (a failed call's tokens were still
  // generated and delivered).
  int64_t generated_tokens = 0;
  // Start → first message carrying a token (ok calls).
  LatencyStats time_to_first_token;
  // Gap between consecutive token-carrying messages divided by the tokens the
  // later one carries, one sample per token (ok calls).
  LatencyStats inter_token;
  // Start → end of the stream (ok calls).
  LatencyStats end_to_end;
  // gRPC status code name → failed calls.
  std::map<std::string, int64_t> errors;
  // One message per error code: the first seen, to say why.
  std::map<std::string, std::string> first_error_messages;
  // Open loop: arrivals that had to wait for a call to finish.
  int64_t num_delayed_starts = 0;
  int64_t max_in_flight_seen = 0;
};

// Builds request `index` (0-based). Called on the driver thread only.
using RequestFactory = std::function<v1::GenerateRequest(int64_t index)>;

// Runs one load. `channel` must outlive the call; `options` must be valid.
// Every request is sent with response.return_token_ids set (the latencies
// count tokens). Blocks until every started call has finished.
LoadResult RunLoad(const std::shared_ptr<grpc::Channel>& channel,
                   const LoadOptions& options, const RequestFactory& factory);

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_LOAD_GENERATOR_H_

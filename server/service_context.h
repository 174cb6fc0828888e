// What every RPC handler of the Tributary service shares (owned by Server),
// and the per-call steps common to all of them: the bearer-token check, the
// request id, and the record of a finished generation (metrics and the one
// structured log line per request, design.md §5).
#ifndef TRIBUTARY_SERVER_SERVICE_CONTEXT_H_
#define TRIBUTARY_SERVER_SERVICE_CONTEXT_H_

#include <atomic>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/runtime/engine.h"
#include "engine/telemetry/residual_window.h"
#include "grpcpp/grpcpp.h"
#include "server/request_converter.h"
#include "server/response_pump.h"
#include "server/server_config.h"
#include "server/server_metrics.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

struct ServiceContext {
  Engine* engine = nullptr;
  const RequestConverter* converter = nullptr;
  const ServerConfig* config = nullptr;
  ServerMetrics* metrics = nullptr;           // null: no metrics
  ResidualWindow* residual_window = nullptr;  // null: stats off
  ResponsePump* pump = nullptr;  // runs the reactors' gRPC calls
  v1::ModelInfo model_info;
  // Set when the server drains: new work gets UNAVAILABLE.
  std::atomic<bool> draining{false};

  // UNAUTHENTICATED unless the call carries the configured bearer token
  // (always OK when no token is configured).
  grpc::Status CheckAuth(const grpc::CallbackServerContext& call) const;
  // The client's "x-request-id" (at most 128 printable ASCII bytes, else
  // INVALID_ARGUMENT) or a generated one; also sets it in the response's
  // initial metadata.
  absl::StatusOr<std::string> RequestId(grpc::CallbackServerContext* call) const;

  // The same two checks for the HTTP API, on a header's value (null when
  // the header is absent).
  absl::Status CheckBearer(const char* authorization) const;
  static absl::StatusOr<std::string> RequestIdFrom(const char* x_request_id);
};

// One Generate / GenerateStream call's bookkeeping: inter-token gaps as
// events arrive, then at the end the metrics and the JSON log line.
class GenerationRecord {
 public:
  GenerationRecord(const ServiceContext& service, std::string method);
  void set_request_id(std::string id) { request_id_ = std::move(id); }
  const std::string& request_id() const { return request_id_; }
  // Call for every engine event (engine thread).
  void OnEvent(const TokenEvent& event);
  // The call's final status, with the final event if the engine sent one.
  void Finish(const grpc::Status& status, const TokenEvent* final_event);

 private:
  const ServiceContext& service_;
  std::string method_;
  std::string request_id_;
  absl::Time start_;
  absl::Time last_token_;
  bool has_token_ = false;
  bool finished_ = false;
};

// The gRPC status for an engine final event: OK, CANCELLED (or
// DEADLINE_EXCEEDED past the call's deadline) for a cancellation, else the
// engine's error.
grpc::Status FinalStatus(const TokenEvent& event,
                         const grpc::CallbackServerContext& call);

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_SERVICE_CONTEXT_H_

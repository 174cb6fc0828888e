// tributary-server's composition (design.md §2, §5): the model and its
// tokenizer, the engine, the Tributary service on the API port (with
// health and reflection), the plaintext health-only port, the Prometheus
// endpoint and the health monitor. main.cc and the integration tests both
// run it in-process.
#ifndef TRIBUTARY_SERVER_SERVER_H_
#define TRIBUTARY_SERVER_SERVER_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/runtime/engine.h"
#include "engine/model/model_directory.h"
#include "engine/model/vector_library.h"
#include "engine/telemetry/residual_window.h"
#include "engine/tokenizer/tokenizer.h"
#include "grpcpp/grpcpp.h"
#include "server/health_monitor.h"
#include "server/health_service.h"
#include "server/http_server.h"
#include "server/reflection_service.h"
#include "server/request_converter.h"
#include "server/server_config.h"
#include "server/server_metrics.h"
#include "server/service_context.h"
#include "server/tributary_service.h"

namespace prometheus {
class Exposer;
}

namespace tributary {

class Server {
 public:
  // Loads the model (logging progress), starts the engine and the
  // listeners (one log line each, with the port really bound). Errors name
  // the cause: a model that fails to load, a port in use, a bad TLS file.
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerConfig config);
  ~Server();  // Drain(0) if not drained yet

  int api_port() const { return api_port_; }
  int health_port() const { return health_port_; }    // -1: off
  int metrics_port() const { return metrics_port_; }  // -1: off
  int http_port() const;                              // -1: off

  // Asks Wait() to return (a signal handler thread, the failure callback).
  void RequestStop(absl::Status reason);
  // Blocks until RequestStop; returns its reason (OK for a signal).
  absl::Status Wait();

  // Graceful drain: health NOT_SERVING first, new requests UNAVAILABLE,
  // in-flight work may finish until `grace`, then what remains is
  // cancelled, and the listeners close. Idempotent.
  void Drain(absl::Duration grace);

  Engine& engine() { return *engine_; }
  HealthMonitor& health() { return *health_; }
  ServerMetrics* metrics() { return metrics_.get(); }
  const ModelDirectory& model() const { return *model_; }

 private:
  class Observer;
  Server() = default;
  absl::Status Init(ServerConfig config);
  absl::Status StartApiServer();
  absl::Status StartHealthServer();
  absl::Status StartMetrics();
  absl::Status StartHttpApi();
  void BuildModelInfo();

  ServerConfig config_;
  // Destroyed after the listeners and the engine, which post to it.
  std::unique_ptr<ResponsePump> pump_;
  std::optional<ModelDirectory> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  VectorLibrary vectors_;
  std::unique_ptr<ResidualWindow> residual_window_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<Observer> observer_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<RequestConverter> converter_;
  ServiceContext service_context_;
  std::unique_ptr<TributaryService> service_;
  // One per listener (a service registers with one server); before the
  // servers, which must not outlive them.
  std::unique_ptr<HealthService> api_health_;
  std::unique_ptr<HealthService> port_health_;
  std::unique_ptr<ReflectionService> api_reflection_;
  std::unique_ptr<ReflectionService> port_reflection_;
  std::unique_ptr<grpc::Server> api_server_;
  std::unique_ptr<grpc::Server> health_server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<HttpApiServer> http_;
  std::unique_ptr<HealthMonitor> health_;
  int api_port_ = -1;
  int health_port_ = -1;
  int metrics_port_ = -1;

  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<absl::Status> stop_reason_;
  bool drained_ = false;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_SERVER_H_

// The OpenAI-compatible HTTP/1.1 API beside gRPC (README "The OpenAI-
// compatible HTTP API"): POST /v1/completions, POST /v1/chat/completions
// (JSON, or Server-Sent Events with "stream": true), GET /v1/models, and
// GET /health. Same bearer token, limits and validation as the gRPC API
// (plaintext only: no TLS, see Server::StartHttpApi) (openai_protocol.h), the same request metrics and log line
// (GenerationRecord, method "OpenAI.Completions" / "OpenAI.ChatCompletions").
//
// civetweb (already under prometheus-cpp's exposer) runs the listener: a
// fixed pool of connection threads. A generation's connection thread submits
// to the engine and waits on its HttpGeneration; the engine thread only
// enqueues events (openai_stream.h), so a slow client never slows a step.
#ifndef TRIBUTARY_SERVER_HTTP_SERVER_H_
#define TRIBUTARY_SERVER_HTTP_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/openai_protocol.h"
#include "server/service_context.h"

struct mg_context;
struct mg_connection;

namespace tributary {

class HttpApiServer {
 public:
  // Listens on config.host:config.http_port (0: a free port), plaintext;
  // one log line with the bound port.
  static absl::StatusOr<std::unique_ptr<HttpApiServer>> Start(
      ServiceContext& service, std::string served_model);
  ~HttpApiServer();  // Stop()

  int port() const { return port_; }
  // Closes the listener and waits for the connection threads (a generation
  // in flight ends first: call after Engine::Shutdown). Idempotent.
  void Stop();

 private:
  HttpApiServer(ServiceContext& service, std::string served_model);
  static int Handle(mg_connection* conn, void* self);
  void Route(mg_connection* conn);
  void HandleGenerate(mg_connection* conn, OpenAiEndpoint endpoint,
                      const std::string& request_id);
  void HandleModels(mg_connection* conn, const std::string& request_id);

  ServiceContext& service_;
  const std::string served_model_;
  const int64_t created_;  // for /v1/models
  mg_context* ctx_ = nullptr;
  int port_ = -1;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_HTTP_SERVER_H_

// The OpenAI-compatible HTTP/1.1 API beside gRPC (README "The
// OpenAI-compatible HTTP API"): POST /v1/completions, POST
// /v1/chat/completions (JSON, or Server-Sent Events with "stream": true:
// completion_handler.h), GET /v1/models and GET /health. The gRPC port's
// security: TLS when --tls-cert/--tls-key are set, mutual TLS with
// --tls-client-ca (a client without a certificate from that CA fails the
// handshake), and the bearer token of --auth-token-file (401 with an OpenAI
// error body; /health is exempt). The same limits and validation as the
// gRPC API (openai_protocol.h).
//
// cpp-httplib (Debian's libcpp-httplib, on OpenSSL) runs the listener: one
// accept thread and a fixed pool of --http-threads connection threads;
// connections beyond that wait, accepted, for a free thread. A request is
// served on its connection thread from start to end; the engine thread
// only enqueues events for it (openai_stream.h), so a slow client never
// slows a step.
#ifndef TRIBUTARY_SERVER_HTTP_SERVER_H_
#define TRIBUTARY_SERVER_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/completion_handler.h"
#include "server/openai_protocol.h"
#include "server/service_context.h"

namespace httplib {
class Server;
struct Request;
struct Response;
class ContentReader;
}  // namespace httplib

namespace tributary {

class HttpApiServer {
 public:
  // Listens on config.host:config.http_port (0: a free port), with TLS when
  // the config has a certificate; one log line with the bound port. Errors:
  // a port in use, a certificate or key that does not load.
  static absl::StatusOr<std::unique_ptr<HttpApiServer>> Start(
      ServiceContext& service, std::string served_model);
  ~HttpApiServer();  // Stop()

  int port() const { return port_; }
  // Closes the listener and waits for the connection threads: a request in
  // flight ends first (call after Engine::Shutdown, so that every
  // generation has its final event), an idle keep-alive connection within
  // its keep-alive timeout (2 s). Idempotent.
  void Stop();

 private:
  HttpApiServer(ServiceContext& service, std::string served_model);
  // Every request, whatever its method and path. `reader` reads the body of
  // a POST/PUT/PATCH/DELETE (null for the others: read already).
  void Handle(const httplib::Request& request, httplib::Response* response,
              const httplib::ContentReader* reader);
  // GET /v1/models (model_id empty) or /v1/models/{model_id}.
  void HandleModels(const std::optional<std::string>& model_id,
                    const std::string& request_id, httplib::Response* response);
  // Errors cpp-httplib answers by itself (a malformed request line, a body
  // over --max-message-bytes): the OpenAI error body.
  void FillLibraryError(const httplib::Request& request,
                        httplib::Response* response);

  ServiceContext& service_;
  const std::string served_model_;
  const int64_t created_;  // for /v1/models
  CompletionHandler completions_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  std::atomic<bool> listener_done_{false};
  int port_ = -1;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_HTTP_SERVER_H_

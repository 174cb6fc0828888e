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
// The listener (http_listener.h) reads every request whole, under its
// limits and deadlines, on one event thread; this router answers health,
// models and every refusal there at once, and completions on the
// listener's worker threads, which wait on the engine (the engine thread
// only enqueues events for them: openai_stream.h, so a slow client never
// slows a step).
#ifndef TRIBUTARY_SERVER_HTTP_SERVER_H_
#define TRIBUTARY_SERVER_HTTP_SERVER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/completion_handler.h"
#include "server/http_listener.h"
#include "server/http_message.h"
#include "server/openai_protocol.h"
#include "server/service_context.h"

namespace tributary {

class HttpApiServer : public HttpHandler {
 public:
  // Listens on config.host:config.http_port (0: a free port), with TLS when
  // the config has a certificate, under the config's HTTP limits; one log
  // line with the bound port. Errors: a limit out of range, a port in use,
  // a certificate or key that does not load.
  static absl::StatusOr<std::unique_ptr<HttpApiServer>> Start(
      ServiceContext& service, std::string served_model);
  ~HttpApiServer() override;  // Stop()

  int port() const { return listener_->port(); }
  // Closes the listener and every idle connection, and waits for the
  // requests being answered (call after Engine::Shutdown, so that every
  // generation has its final event). Idempotent.
  void Stop();

  // HttpHandler: completions wait on the engine; the rest answers at once.
  bool Blocks(const HttpRequest& request) const override;
  void Handle(const HttpRequest& request, HttpResponse* response) override;
  void FillError(int status, const std::string& message,
                 HttpResponse* response) override;
  void OnRefusal(int status) override;  // tributary_http_refused_total

 private:
  HttpApiServer(ServiceContext& service, std::string served_model);
  // GET /v1/models (model_id empty) or /v1/models/{model_id}.
  void HandleModels(const std::optional<std::string>& model_id,
                    const std::string& request_id, HttpResponse* response);

  ServiceContext& service_;
  const std::string served_model_;
  const int64_t created_;  // for /v1/models
  CompletionHandler completions_;
  std::unique_ptr<HttpListener> listener_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_HTTP_SERVER_H_

#include "server/http_server.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/tokenizer/utf8.h"
#include "nlohmann/json.hpp"
#include "server/http_reply.h"

namespace tributary {
namespace {

using nlohmann::json;

OpenAiError HttpError(int status, std::string message) {
  OpenAiError e;
  e.http_status = status;
  e.message = std::move(message);
  if (status == 404) e.type = "not_found_error";
  if (status >= 500) e.type = "internal_error";
  return e;
}

}  // namespace

HttpApiServer::HttpApiServer(ServiceContext& service, std::string served_model)
    : service_(service),
      served_model_(std::move(served_model)),
      created_(absl::ToUnixSeconds(absl::Now())),
      completions_(service, served_model_) {}

absl::StatusOr<std::unique_ptr<HttpApiServer>> HttpApiServer::Start(
    ServiceContext& service, std::string served_model) {
  const ServerConfig& config = *service.config;
  std::unique_ptr<HttpApiServer> server(
      new HttpApiServer(service, std::move(served_model)));
  HttpListenerOptions options;
  options.host = config.host;
  options.port = config.http_port;
  options.tls_cert_file = config.tls_cert_file;
  options.tls_key_file = config.tls_key_file;
  options.tls_client_ca_file = config.tls_client_ca_file;
  options.worker_threads = config.http_threads;
  options.max_connections = config.http_max_connections;
  options.backlog = config.http_backlog;
  options.max_head_bytes = config.http_max_head_bytes;
  options.max_headers = config.http_max_headers;
  options.max_body_bytes = config.max_message_bytes;
  options.head_timeout = config.http_head_timeout;
  options.body_timeout = config.http_body_timeout;
  options.idle_timeout = config.http_idle_timeout;
  // A write (a client that does not read its stream) gives up after the
  // gRPC stream's --stream-write-timeout.
  options.write_timeout = config.slow_readers.max_write_pending;
  ASSIGN_OR_RETURN(server->listener_, HttpListener::Start(options, server.get()));
  const HttpListener& listener = *server->listener_;
  LogInfo("HTTP API listening on ", listener.tls() ? "https://" : "http://",
          config.host, ":", listener.port(),
          " (OpenAI-compatible, model \"", server->served_model_, "\"",
          listener.mutual_tls() ? ", mutual TLS"
          : listener.tls()      ? ", TLS"
                                : "",
          ")", config.auth_token.empty() ? "" : ", bearer token required");
  return server;
}

HttpApiServer::~HttpApiServer() { Stop(); }

void HttpApiServer::Stop() {
  if (listener_ != nullptr) listener_->Stop();
}

bool HttpApiServer::Blocks(const HttpRequest& request) const {
  return request.method == "POST" && (request.path == "/v1/completions" ||
                                      request.path == "/v1/chat/completions");
}

void HttpApiServer::Handle(const HttpRequest& request,
                           HttpResponse* response) {
  const std::optional<std::string> id_header = request.Header("X-Request-Id");
  absl::StatusOr<std::string> id = ServiceContext::RequestIdFrom(
      id_header ? id_header->c_str() : nullptr);
  if (!id.ok()) {
    ReplyError(response,
               BadParam("x-request-id", std::string(id.status().message())),
               "");
    return;
  }
  const std::string& path = request.path;
  // The probe of load balancers, exempt from the token like gRPC health.
  if (path == "/health") {
    const bool ok =
        !service_.draining.load() && !service_.engine->counts().failed;
    ReplyJson(response, ok ? 200 : 503,
              json{{"status", ok ? "ok" : "unavailable"}}, *id);
    return;
  }
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  bool is_models = false;
  // GET /v1/models/{id}: the SDKs' models.retrieve.
  constexpr absl::string_view kModelPrefix = "/v1/models/";
  std::optional<std::string> model_id;
  if (path == "/v1/completions") {
    endpoint = OpenAiEndpoint::kCompletions;
  } else if (path == "/v1/chat/completions") {
    endpoint = OpenAiEndpoint::kChatCompletions;
  } else if (path == "/v1/models") {
    is_models = true;
  } else if (absl::StartsWith(path, kModelPrefix) &&
             path.size() > kModelPrefix.size()) {
    is_models = true;
    model_id = path.substr(kModelPrefix.size());
  } else {
    ReplyError(
        response,
        HttpError(404, absl::StrCat("no such endpoint: ", Utf8Excerpt(path, 100))),
        *id);
    return;
  }
  const std::string& method = request.method;
  // HEAD answers as GET does (the listener sends the headers only).
  const bool method_ok =
      is_models ? (method == "GET" || method == "HEAD") : method == "POST";
  if (!method_ok) {
    OpenAiError e = HttpError(
        405, absl::StrCat(Utf8Excerpt(method, 16), " is not allowed on ", path,
                          "; use ", is_models ? "GET" : "POST"));
    ReplyError(response, e, *id);
    return;
  }
  const std::optional<std::string> authorization = request.Header("Authorization");
  if (absl::Status auth = service_.CheckBearer(
          authorization ? authorization->c_str() : nullptr);
      !auth.ok()) {
    ReplyError(response, ToOpenAiError(auth, OpenAiEndpoint::kCompletions), *id);
    return;
  }
  if (is_models) {
    HandleModels(model_id, *id, response);
  } else {
    completions_.Serve(endpoint, *id, request, response);
  }
}

void HttpApiServer::HandleModels(const std::optional<std::string>& model_id,
                                 const std::string& request_id,
                                 HttpResponse* response) {
  json model{{"id", served_model_},
             {"object", "model"},
             {"created", created_},
             {"owned_by", "tributary"},
             {"max_model_len", service_.model_info.context_tokens()}};
  if (!model_id) {
    ReplyJson(response, 200,
              json{{"object", "list"}, {"data", json::array({model})}},
              request_id);
    return;
  }
  if (*model_id != served_model_) {
    OpenAiError e = HttpError(
        404, absl::StrCat("the model \"", Utf8Excerpt(*model_id, 64),
                          "\" does not exist; this server serves \"",
                          served_model_, "\""));
    e.type = "invalid_request_error";
    e.code = "model_not_found";
    ReplyError(response, e, request_id);
    return;
  }
  ReplyJson(response, 200, model, request_id);
}

void HttpApiServer::OnRefusal(int status) {
  if (service_.metrics != nullptr) service_.metrics->RecordHttpRefusal(status);
}

void HttpApiServer::FillError(int status, const std::string& message,
                              HttpResponse* response) {
  // A fresh id: the request's own may be what was malformed.
  absl::StatusOr<std::string> id = ServiceContext::RequestIdFrom(nullptr);
  ReplyError(response, HttpError(status, message), id.ok() ? *id : "");
}

}  // namespace tributary

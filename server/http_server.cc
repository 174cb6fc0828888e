#include "server/http_server.h"

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/logging.h"
#include "engine/tokenizer/utf8.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "server/http_reply.h"

namespace tributary {
namespace {

using nlohmann::json;

// An idle keep-alive connection holds one of the --http-threads until the
// client sends its next request or this passes; Stop() waits for it too.
constexpr time_t kKeepAliveSeconds = 2;
constexpr size_t kKeepAliveMaxRequests = 100;

// The request body, read before any answer: whatever is left unread would
// be parsed as the next request on the connection.
struct Body {
  std::optional<std::string> text = std::string();  // nullopt: too large
  bool complete = true;    // false: the rest is still unread
  bool malformed = false;  // a bad chunked encoding, a timeout
};

Body ReadBody(const httplib::ContentReader& reader, httplib::Response* response,
              int64_t limit) {
  Body body;
  body.text.emplace();
  bool over = false;
  // cpp-httplib refuses (413, and skips the rest) a Content-Length over
  // its payload limit by itself; this counts what it does not: a chunked
  // body, and a compressed one after decompression.
  const bool ok = reader([&](const char* data, size_t n) {
    if (static_cast<int64_t>(body.text->size() + n) > limit) {
      over = true;
      return false;
    }
    body.text->append(data, n);
    return true;
  });
  if (over) {
    body.text.reset();
    body.complete = false;
  } else if (!ok && response->status == 413) {
    body.text.reset();
  } else if (!ok) {
    body.malformed = true;
    body.complete = false;
  }
  return body;
}

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
  HttpApiServer* self = server.get();
  const bool tls = !config.tls_cert_file.empty();
  const bool mutual_tls = tls && !config.tls_client_ca_file.empty();
  if (tls) {
    // With a client CA, cpp-httplib sets SSL_VERIFY_PEER |
    // SSL_VERIFY_FAIL_IF_NO_PEER_CERT: no certificate from that CA, no
    // handshake.
    auto https = std::make_unique<httplib::SSLServer>(
        config.tls_cert_file.c_str(), config.tls_key_file.c_str(),
        mutual_tls ? config.tls_client_ca_file.c_str() : nullptr);
    if (!https->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the HTTP API cannot load --tls-cert ", config.tls_cert_file,
          " with --tls-key ", config.tls_key_file,
          " (PEM files; the key must match the certificate)"));
    }
    SSL_CTX* ctx = https->ssl_context();
    // The gRPC port's floor (cpp-httplib's own is TLS 1.1).
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (mutual_tls) {
      // Named in the certificate request, so that a client holding several
      // certificates picks the right one.
      STACK_OF(X509_NAME)* names =
          SSL_load_client_CA_file(config.tls_client_ca_file.c_str());
      if (names == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("the HTTP API cannot read a CA certificate from "
                         "--tls-client-ca ",
                         config.tls_client_ca_file));
      }
      SSL_CTX_set_client_CA_list(ctx, names);  // takes ownership
    }
    server->http_ = std::move(https);
  } else {
    server->http_ = std::make_unique<httplib::Server>();
  }
  // (cpp-httplib's Server sets SIGPIPE to SIG_IGN for the process: a write
  // to a client that left fails with EPIPE, also through OpenSSL, instead
  // of killing the server.)
  httplib::Server& http = *server->http_;
  // A fixed pool: connections beyond it wait, accepted, for a thread.
  const int num_threads = config.http_threads;
  http.new_task_queue = [num_threads] {
    return new httplib::ThreadPool(static_cast<size_t>(num_threads));
  };
  // SSE events are small writes that must leave at once (Nagle would hold
  // one back until the previous one is acknowledged).
  http.set_tcp_nodelay(true);
  http.set_keep_alive_timeout(kKeepAliveSeconds);
  http.set_keep_alive_max_count(kKeepAliveMaxRequests);
  // A read or a write (a client that does not read its stream) gives up
  // after the gRPC stream's --stream-write-timeout.
  const auto timeout = absl::ToChronoMicroseconds(config.slow_readers.max_write_pending);
  http.set_read_timeout(timeout);
  http.set_write_timeout(timeout);
  http.set_payload_max_length(static_cast<size_t>(config.max_message_bytes));

  http.Get(".*", [self](const httplib::Request& request,
                        httplib::Response& response) {
    self->Handle(request, &response, nullptr);
  });
  http.Options(".*", [self](const httplib::Request& request,
                            httplib::Response& response) {
    self->Handle(request, &response, nullptr);
  });
  const httplib::Server::HandlerWithContentReader with_body =
      [self](const httplib::Request& request, httplib::Response& response,
             const httplib::ContentReader& reader) {
        self->Handle(request, &response, &reader);
      };
  http.Post(".*", with_body);
  http.Put(".*", with_body);
  http.Patch(".*", with_body);
  http.Delete(".*", with_body);
  // Called for every answer of status >= 400; ours have their body.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [self](const httplib::Request& request, httplib::Response& response) {
        if (!response.body.empty() || response.content_provider_) {
          return httplib::Server::HandlerResponse::Unhandled;
        }
        self->FillLibraryError(request, &response);
        return httplib::Server::HandlerResponse::Handled;
      }));

  const std::string address = absl::StrCat(config.host, ":", config.http_port);
  int port = config.http_port;
  if (port == 0) {
    port = http.bind_to_any_port(config.host);
  } else if (!http.bind_to_port(config.host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve the HTTP API on ",
                                               address, " (port in use?)"));
  }
  server->port_ = port;
  server->listener_ = std::thread([self] {
    self->http_->listen_after_bind();
    self->listener_done_.store(true);
  });
  // Stop() may only stop a running server: cpp-httplib ignores a stop()
  // that comes before its accept loop started.
  while (!http.is_running() && !server->listener_done_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (server->listener_done_.load()) {
    return absl::UnavailableError(
        absl::StrCat("the HTTP API stopped listening on ", address));
  }
  LogInfo("HTTP API listening on ", tls ? "https://" : "http://", config.host,
          ":", port, " (OpenAI-compatible, model \"", server->served_model_,
          "\"",
          mutual_tls ? ", mutual TLS"
          : tls      ? ", TLS"
                     : "",
          ")", config.auth_token.empty() ? "" : ", bearer token required");
  return server;
}

HttpApiServer::~HttpApiServer() { Stop(); }

void HttpApiServer::Stop() {
  if (!listener_.joinable()) return;
  if (!listener_done_.load()) http_->stop();
  listener_.join();
}

void HttpApiServer::Handle(const httplib::Request& request,
                           httplib::Response* response,
                           const httplib::ContentReader* reader) {
  Body body;
  // HTTP/1.1: a request with neither Content-Length nor a chunked body has
  // none; cpp-httplib would wait for the connection to close instead.
  const bool has_body =
      request.has_header("Content-Length") ||
      absl::EqualsIgnoreCase(request.get_header_value("Transfer-Encoding"),
                             "chunked");
  // The encodings cpp-httplib decodes (Debian builds it with zlib and
  // brotli); anything else is refused before the body is read.
  const std::string encoding = request.get_header_value("Content-Encoding");
  const bool encoded =
      !encoding.empty() && !absl::EqualsIgnoreCase(encoding, "identity");
  if (encoded && !absl::EqualsIgnoreCase(encoding, "gzip") &&
      !absl::EqualsIgnoreCase(encoding, "deflate") &&
      !absl::EqualsIgnoreCase(encoding, "br")) {
    ReplyErrorAndClose(
        request, response,
        HttpError(415, absl::StrCat("Content-Encoding: ", Utf8Excerpt(encoding, 32),
                                    " is not supported (identity, gzip, "
                                    "deflate or br)")),
        ServiceContext::RequestIdFrom(nullptr).value_or(""));
    return;
  }
  if (reader != nullptr && has_body) {
    body = ReadBody(*reader, response, service_.config->max_message_bytes);
  }
  auto reply_error = [&](const OpenAiError& e, const std::string& id) {
    if (body.complete) {
      ReplyError(response, e, id);
    } else {
      ReplyErrorAndClose(request, response, e, id);
    }
  };
  const std::string id_header = request.get_header_value("X-Request-Id");
  absl::StatusOr<std::string> id = ServiceContext::RequestIdFrom(
      request.has_header("X-Request-Id") ? id_header.c_str() : nullptr);
  if (!id.ok()) {
    reply_error(BadParam("x-request-id", std::string(id.status().message())),
                "");
    return;
  }
  if (body.malformed) {
    reply_error(
        HttpError(400, absl::StrCat(
                           "the request body could not be read (",
                           encoded ? absl::StrCat("not valid Content-Encoding: ",
                                                  Utf8Excerpt(encoding, 32), ", ")
                                   : std::string(),
                           "a bad chunked encoding, or the client stalled)")),
        *id);
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
    reply_error(
        HttpError(404, absl::StrCat("no such endpoint: ", Utf8Excerpt(path, 100))),
        *id);
    return;
  }
  const std::string& method = request.method;
  // HEAD answers as GET does (cpp-httplib sends the headers only).
  const bool method_ok =
      is_models ? (method == "GET" || method == "HEAD") : method == "POST";
  if (!method_ok) {
    OpenAiError e = HttpError(
        405, absl::StrCat(Utf8Excerpt(method, 16), " is not allowed on ", path,
                          "; use ", is_models ? "GET" : "POST"));
    reply_error(e, *id);
    return;
  }
  const std::string authorization = request.get_header_value("Authorization");
  if (absl::Status auth = service_.CheckBearer(
          request.has_header("Authorization") ? authorization.c_str()
                                              : nullptr);
      !auth.ok()) {
    reply_error(ToOpenAiError(auth, OpenAiEndpoint::kCompletions), *id);
    return;
  }
  if (is_models) {
    HandleModels(model_id, *id, response);
  } else {
    completions_.Serve(endpoint, *id, body.text, body.complete, request,
                       response);
  }
}

void HttpApiServer::HandleModels(const std::optional<std::string>& model_id,
                                 const std::string& request_id,
                                 httplib::Response* response) {
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

void HttpApiServer::FillLibraryError(const httplib::Request& request,
                                     httplib::Response* response) {
  std::string message;
  switch (response->status) {
    case 400:
      message = "malformed HTTP request";
      break;
    case 404:
      message = absl::StrCat("no such endpoint: ", Utf8Excerpt(request.path, 100));
      break;
    case 413:
      message = absl::StrCat("the body is larger than ",
                             service_.config->max_message_bytes,
                             " bytes (--max-message-bytes)");
      break;
    case 414:
      message = "the request target is too long";
      break;
    case 416:
      message = "the Range header cannot be satisfied";
      break;
    default:
      message = absl::StrCat("HTTP ", response->status);
      break;
  }
  // A fresh id: the request's own may be what was malformed.
  absl::StatusOr<std::string> id = ServiceContext::RequestIdFrom(nullptr);
  ReplyError(response, HttpError(response->status, std::move(message)),
             id.ok() ? *id : "");
}

}  // namespace tributary

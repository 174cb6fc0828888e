#include "server/http_server.h"

#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "civetweb.h"
#include "engine/base/logging.h"
#include "nlohmann/json.hpp"
#include "server/openai_response.h"
#include "server/openai_stream.h"
#include "server/status_conversion.h"

namespace tributary {
namespace {

using nlohmann::json;

// An idle stream writes an SSE comment this often: a client that went away
// is noticed (the write fails) even while no token comes.
constexpr absl::Duration kHeartbeat = absl::Seconds(5);

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void SendJson(mg_connection* conn, int status, const json& body,
              const std::string& request_id, int retry_after = 0) {
  const std::string text = Dump(body) + "\n";
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", "application/json", -1);
  mg_response_header_add(conn, "Content-Length",
                         std::to_string(text.size()).c_str(), -1);
  if (!request_id.empty()) {
    mg_response_header_add(conn, "X-Request-Id", request_id.c_str(), -1);
  }
  if (retry_after > 0) {
    mg_response_header_add(conn, "Retry-After",
                           std::to_string(retry_after).c_str(), -1);
  }
  mg_response_header_send(conn);
  mg_write(conn, text.data(), text.size());
}

void SendError(mg_connection* conn, const OpenAiError& e,
               const std::string& request_id) {
  SendJson(conn, e.http_status, e.ToJson(), request_id, e.retry_after_seconds);
}

// The status a finished generation is recorded with (metrics, log line).
grpc::Status RecordStatus(const TokenEvent& final_event, bool cut_off) {
  if (!final_event.status.ok()) return ToGrpcStatus(final_event.status);
  if (final_event.finish_reason == FinishReason::kCancelled) {
    return cut_off ? grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                  "the client stopped reading")
                   : grpc::Status(grpc::StatusCode::CANCELLED,
                                  "the request was cancelled");
  }
  return grpc::Status::OK;
}

// The body, at most `limit` bytes; nullopt when it is bigger.
std::optional<std::string> ReadBody(mg_connection* conn, int64_t limit) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info->content_length > limit) return std::nullopt;
  std::string body;
  char buffer[16384];
  for (;;) {
    const int n = mg_read(conn, buffer, sizeof(buffer));
    if (n <= 0) break;
    body.append(buffer, static_cast<size_t>(n));
    if (static_cast<int64_t>(body.size()) > limit) return std::nullopt;
  }
  return body;
}

bool WriteEvent(mg_connection* conn, const std::string& data) {
  const std::string frame = absl::StrCat("data: ", data, "\n\n");
  return mg_send_chunk(conn, frame.data(),
                       static_cast<unsigned int>(frame.size())) > 0;
}

int LogMessage(const mg_connection*, const char* message) {
  LogWarning("HTTP API: ", message);
  return 1;
}

}  // namespace

HttpApiServer::HttpApiServer(ServiceContext& service, std::string served_model)
    : service_(service),
      served_model_(std::move(served_model)),
      created_(absl::ToUnixSeconds(absl::Now())) {}

absl::StatusOr<std::unique_ptr<HttpApiServer>> HttpApiServer::Start(
    ServiceContext& service, std::string served_model) {
  const ServerConfig& config = *service.config;
  std::unique_ptr<HttpApiServer> server(
      new HttpApiServer(service, std::move(served_model)));
  // Plaintext only: Debian 12's civetweb 1.15 crashes in the TLS handshake
  // (Server::StartHttpApi keeps the API off when TLS is configured).
  const std::string ports = absl::StrCat(config.host, ":", config.http_port);
  const std::string threads = std::to_string(config.http_threads);
  // A write to a client that does not read gives up after this long (the
  // gRPC stream's --stream-write-timeout).
  const std::string timeout_ms = std::to_string(
      absl::ToInt64Milliseconds(config.stream_write_timeout));
  const char* options[] = {"listening_ports", ports.c_str(),
                           "num_threads", threads.c_str(),
                           "enable_keep_alive", "yes",
                           "keep_alive_timeout_ms", "5000",
                           "request_timeout_ms", timeout_ms.c_str(),
                           nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = LogMessage;
  mg_init_library(0);
  server->ctx_ = mg_start(&callbacks, nullptr, options);
  if (server->ctx_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve the HTTP API on ", ports, " (port in use?)"));
  }
  mg_set_request_handler(server->ctx_, "/", &HttpApiServer::Handle,
                         server.get());
  mg_server_port bound[4];
  const int n = mg_get_server_ports(server->ctx_, 4, bound);
  server->port_ = n > 0 ? bound[0].port : config.http_port;
  LogInfo("HTTP API listening on http://", config.host,
          ":", server->port_, " (OpenAI-compatible, model \"",
          server->served_model_, "\")",
          config.auth_token.empty() ? "" : ", bearer token required");
  return server;
}

HttpApiServer::~HttpApiServer() { Stop(); }

void HttpApiServer::Stop() {
  if (ctx_ == nullptr) return;
  mg_stop(ctx_);
  ctx_ = nullptr;
}

int HttpApiServer::Handle(mg_connection* conn, void* self) {
  static_cast<HttpApiServer*>(self)->Route(conn);
  return 1;  // handled (the status went out with the headers)
}

void HttpApiServer::Route(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  const std::string method = info->request_method;
  const std::string uri = info->local_uri != nullptr ? info->local_uri : "";
  absl::StatusOr<std::string> id =
      ServiceContext::RequestIdFrom(mg_get_header(conn, "X-Request-Id"));
  if (!id.ok()) {
    SendError(conn, BadParam("x-request-id", std::string(id.status().message())),
              "");
    return;
  }
  // The probe of load balancers, exempt from the token like gRPC health.
  if (uri == "/health") {
    const bool ok = !service_.draining.load() && !service_.engine->counts().failed;
    SendJson(conn, ok ? 200 : 503, json{{"status", ok ? "ok" : "unavailable"}},
             *id);
    return;
  }
  OpenAiEndpoint endpoint;
  bool is_models = false;
  if (uri == "/v1/completions") {
    endpoint = OpenAiEndpoint::kCompletions;
  } else if (uri == "/v1/chat/completions") {
    endpoint = OpenAiEndpoint::kChatCompletions;
  } else if (uri == "/v1/models") {
    is_models = true;
  } else {
    OpenAiError e;
    e.http_status = 404;
    e.type = "not_found_error";
    e.message = absl::StrCat("no such endpoint: ", uri.substr(0, 100));
    SendError(conn, e, *id);
    return;
  }
  if (method != (is_models ? "GET" : "POST")) {
    OpenAiError e;
    e.http_status = 405;
    e.message = absl::StrCat(method.substr(0, 16), " is not allowed on ", uri,
                             "; use ", is_models ? "GET" : "POST");
    SendError(conn, e, *id);
    return;
  }
  if (absl::Status auth = service_.CheckBearer(mg_get_header(conn, "Authorization"));
      !auth.ok()) {
    SendError(conn, ToOpenAiError(auth, OpenAiEndpoint::kCompletions), *id);
    return;
  }
  if (is_models) {
    HandleModels(conn, *id);
  } else {
    HandleGenerate(conn, endpoint, *id);
  }
}

void HttpApiServer::HandleModels(mg_connection* conn,
                                 const std::string& request_id) {
  json model{{"id", served_model_},
             {"object", "model"},
             {"created", created_},
             {"owned_by", "tributary"},
             {"max_model_len", service_.model_info.context_tokens()}};
  SendJson(conn, 200, json{{"object", "list"}, {"data", json::array({model})}},
           request_id);
}

void HttpApiServer::HandleGenerate(mg_connection* conn, OpenAiEndpoint endpoint,
                                   const std::string& request_id) {
  const bool chat = endpoint == OpenAiEndpoint::kChatCompletions;
  GenerationRecord record(
      service_, chat ? "OpenAI.ChatCompletions" : "OpenAI.Completions");
  record.set_request_id(request_id);
  auto fail = [&](const OpenAiError& e, grpc::StatusCode code) {
    record.Finish(grpc::Status(code, e.message), nullptr);
    SendError(conn, e, request_id);
  };
  if (service_.draining.load()) {
    OpenAiError e = ToOpenAiError(absl::UnavailableError("the server is draining"),
                                  endpoint);
    fail(e, grpc::StatusCode::UNAVAILABLE);
    return;
  }
  const int64_t limit = service_.config->max_message_bytes;
  std::optional<std::string> body = ReadBody(conn, limit);
  if (!body) {
    OpenAiError e;
    e.http_status = 413;
    e.message = absl::StrCat("the body is larger than ", limit,
                             " bytes (--max-message-bytes)");
    fail(e, grpc::StatusCode::RESOURCE_EXHAUSTED);
    return;
  }
  OpenAiRequest request;
  if (std::optional<OpenAiError> e =
          ParseOpenAiRequest(*body, endpoint, served_model_, &request)) {
    fail(*e, e->http_status == 404 ? grpc::StatusCode::NOT_FOUND
                                   : grpc::StatusCode::INVALID_ARGUMENT);
    return;
  }
  absl::StatusOr<GenerateRequest> converted =
      service_.converter->ToEngine(request.generate);
  if (!converted.ok()) {
    fail(ToOpenAiError(converted.status(), endpoint),
         ToGrpcStatus(converted.status()).error_code());
    return;
  }
  auto generation = std::make_shared<HttpGeneration>(
      service_.engine, &record, service_.config->stream_buffer_tokens);
  absl::StatusOr<uint64_t> engine_id =
      service_.engine->Submit(*std::move(converted), generation);
  if (!engine_id.ok()) {
    fail(ToOpenAiError(engine_id.status(), endpoint),
         ToGrpcStatus(engine_id.status()).error_code());
    return;
  }
  generation->set_engine_id(*engine_id);

  OpenAiOutputOptions oo;
  oo.endpoint = endpoint;
  oo.id = absl::StrCat(chat ? "chatcmpl-" : "cmpl-", request_id);
  oo.created = absl::ToUnixSeconds(absl::Now());
  oo.model = served_model_;
  oo.tokenizer = service_.converter->tokenizer();
  oo.logprobs = request.logprobs;
  if (chat && oo.tokenizer != nullptr &&
      oo.tokenizer->chat_template().supports_thinking()) {
    oo.parse_reasoning = true;
    oo.starts_in_reasoning = request.enable_thinking.value_or(
        oo.tokenizer->chat_template().thinking_default());
  }
  OpenAiOutput output(std::move(oo));

  // From here on the engine sends exactly one final event, and this thread
  // waits for it before returning (the record and the sink outlive it).
  bool client_gone = false;
  if (request.stream) {
    mg_response_header_start(conn, 200);
    mg_response_header_add(conn, "Content-Type", "text/event-stream", -1);
    mg_response_header_add(conn, "Cache-Control", "no-cache", -1);
    mg_response_header_add(conn, "Transfer-Encoding", "chunked", -1);
    mg_response_header_add(conn, "X-Request-Id", request_id.c_str(), -1);
    client_gone = mg_response_header_send(conn) != 0;
  }
  std::optional<TokenEvent> final_event;
  std::deque<TokenEvent> events;
  while (!final_event) {
    if (!generation->Take(kHeartbeat, &events)) {
      // Nothing for a while: check that a streaming client is still there.
      if (request.stream && !client_gone) {
        client_gone = mg_send_chunk(conn, ": keep-alive\n\n", 14) <= 0;
        if (client_gone) generation->Cancel();
      }
      continue;
    }
    for (TokenEvent& e : events) {
      if (e.is_final) final_event = std::move(e);
      else output.Add(e);
    }
    events.clear();
    if (final_event && final_event->status.ok() &&
        final_event->finish_reason != FinishReason::kCancelled) {
      output.Add(*final_event);
    }
    if (!request.stream || client_gone) continue;
    if (std::optional<json> chunk = output.TakeChunk()) {
      if (!WriteEvent(conn, Dump(*chunk))) {
        // A client that disconnects mid-stream cancels its sequence.
        client_gone = true;
        generation->Cancel();
      }
    }
  }
  const grpc::Status status =
      RecordStatus(*final_event, generation->cut_off());
  record.Finish(status, &*final_event);
  if (client_gone) return;

  OpenAiError error;
  if (!final_event->status.ok()) {
    error = ToOpenAiError(final_event->status, endpoint);
  } else if (generation->cut_off()) {
    error = ToOpenAiError(absl::ResourceExhaustedError(absl::StrCat(
                              "the client stopped reading: more than ",
                              generation->max_pending_tokens(),
                              " tokens waited for it")),
                          endpoint);
  } else if (final_event->finish_reason == FinishReason::kCancelled) {
    error = ToOpenAiError(
        absl::UnavailableError("the request was cancelled (the server is "
                               "draining)"),
        endpoint);
  } else {
    error.http_status = 0;  // no error
  }
  if (!request.stream) {
    if (error.http_status != 0) SendError(conn, error, request_id);
    else SendJson(conn, 200, output.Complete(), request_id);
    return;
  }
  // An error after the headers: one error event (what vLLM does), then the
  // stream ends without [DONE].
  if (error.http_status != 0) {
    WriteEvent(conn, Dump(error.ToJson()));
  } else {
    if (request.include_usage) WriteEvent(conn, Dump(output.UsageChunk()));
    WriteEvent(conn, "[DONE]");
  }
  mg_send_chunk(conn, "", 0);  // the last chunk
}

}  // namespace tributary

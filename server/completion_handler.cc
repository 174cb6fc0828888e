#include "server/completion_handler.h"

#include <deque>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "server/client_watch.h"
#include "server/http_reply.h"
#include "server/openai_response.h"
#include "server/openai_stream.h"
#include "server/status_conversion.h"

namespace tributary {
namespace {

using nlohmann::json;

// An idle stream writes an SSE comment this often, so that proxies with an
// idle timeout keep it open while the model thinks (a long prefill).
constexpr absl::Duration kHeartbeat = absl::Seconds(5);
// The longest a waiting connection thread goes without looking at its
// client's socket: a client that disconnects frees its sequence within
// this (plus one engine step, for the cancellation to take effect).
constexpr absl::Duration kWatchInterval = absl::Milliseconds(50);

std::string SseEvent(const std::string& data) {
  return absl::StrCat("data: ", data, "\n\n");
}

// One submitted generation, from Engine::Submit to its final event: the
// request's record, the engine's sink and the answer being built. Shared by
// the handler, a stream's writer and its on_done, which all run on the
// request's worker thread, one after the other. The engine's sink points at
// `record_`, so an Exchange must outlive the final event: Finish() waits for
// it, and on_done calls Finish() even when the writer never ran to its end.
class Exchange {
 public:
  Exchange(ServiceContext& service, const char* method,
           const std::string& request_id)
      : record_(service, method) {
    record_.set_request_id(request_id);
  }
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  GenerationRecord& record() { return record_; }
  OpenAiOutput& output() { return *output_; }
  bool done() const { return final_event_.has_value(); }
  bool client_gone() const { return client_gone_; }

  // The engine's error (not recorded yet) when it refuses the request.
  absl::Status Submit(Engine* engine, GenerateRequest request,
                      const SlowReaderPolicy& policy, OpenAiOutputOptions options,
                      ClientWatch watch) {
    output_.emplace(std::move(options));
    watch_ = watch;
    auto generation =
        std::make_shared<HttpGeneration>(engine, &record_, policy);
    absl::StatusOr<uint64_t> id =
        engine->Submit(std::move(request), generation);
    if (!id.ok()) return id.status();
    generation->set_engine_id(*id);
    generation_ = std::move(generation);
    return absl::OkStatus();
  }

  // Waits up to `timeout` for engine events and adds them to the answer;
  // then looks at the client (cancelling when it left).
  void Pump(absl::Duration timeout) {
    std::deque<TokenEvent> events;
    if (generation_->Take(timeout, &events)) {
      for (TokenEvent& e : events) {
        if (e.is_final) {
          final_event_ = std::move(e);
        } else {
          output_->Add(e);
        }
      }
      if (final_event_ && final_event_->status.ok() &&
          final_event_->finish_reason != FinishReason::kCancelled) {
        output_->Add(*final_event_);
      }
    }
    if (!client_gone_ && !final_event_ && watch_.Gone()) LoseClient();
  }

  // The client went away (its socket closed, or a write failed): stop
  // generating. The final event still comes, at the next step boundary.
  void LoseClient() {
    client_gone_ = true;
    generation_->Cancel();
  }

  // Waits for the final event (cancelling the sequence if it is still
  // running: nobody will read the rest), then records the request.
  // Idempotent; a no-op before a successful Submit.
  void Finish() {
    if (finished_ || generation_ == nullptr) return;
    if (!final_event_) generation_->Cancel();
    while (!final_event_) Pump(kWatchInterval);
    finished_ = true;
    record_.Finish(RecordStatus(), &*final_event_);
  }

  // The error the answer reports (http_status 0: none); after Finish.
  OpenAiError Error(OpenAiEndpoint endpoint) const {
    if (!final_event_->status.ok()) {
      return ToOpenAiError(final_event_->status, endpoint);
    }
    if (generation_->cut_off()) {
      return ToOpenAiError(
          absl::ResourceExhaustedError(generation_->policy().Message()),
          endpoint);
    }
    if (final_event_->finish_reason == FinishReason::kCancelled) {
      return ToOpenAiError(
          absl::UnavailableError(
              "the request was cancelled (the server is draining)"),
          endpoint);
    }
    OpenAiError none;
    none.http_status = 0;
    return none;
  }

 private:
  // The status the request is recorded with (metrics, log line).
  grpc::Status RecordStatus() const {
    if (!final_event_->status.ok()) return ToGrpcStatus(final_event_->status);
    if (final_event_->finish_reason != FinishReason::kCancelled) {
      return grpc::Status::OK;
    }
    if (generation_->cut_off()) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "the client stopped reading");
    }
    return grpc::Status(
        grpc::StatusCode::CANCELLED,
        client_gone_ ? "the client disconnected" : "the request was cancelled");
  }

  GenerationRecord record_;
  std::optional<OpenAiOutput> output_;
  std::shared_ptr<HttpGeneration> generation_;  // null until submitted
  ClientWatch watch_;
  std::optional<TokenEvent> final_event_;
  bool client_gone_ = false;
  bool finished_ = false;
};

// A whole stream, in one call of HttpResponse::stream (the listener has
// written the headers): whatever came from the engine since the last write
// becomes one SSE event, written at once as one chunk. False when the
// client went away: the connection then closes without the last chunk.
bool WriteStream(Exchange& exchange, OpenAiEndpoint endpoint,
                 bool include_usage, HttpBodyWriter& sink) {
  absl::Time last_write = absl::Now();
  auto write = [&](const std::string& text) {
    if (exchange.client_gone()) return;
    if (!sink.Write(text)) exchange.LoseClient();
    last_write = absl::Now();
  };
  while (!exchange.done()) {
    exchange.Pump(kWatchInterval);
    if (std::optional<json> chunk = exchange.output().TakeChunk()) {
      write(SseEvent(DumpJson(*chunk)));
    } else if (absl::Now() - last_write >= kHeartbeat) {
      write(": keep-alive\n\n");
    }
  }
  exchange.Finish();
  if (exchange.client_gone()) return false;
  // An error after the headers: one error event (what vLLM does), then the
  // stream ends without [DONE].
  const OpenAiError error = exchange.Error(endpoint);
  if (error.http_status != 0) {
    write(SseEvent(DumpJson(error.ToJson())));
  } else {
    if (include_usage) {
      write(SseEvent(DumpJson(exchange.output().UsageChunk())));
    }
    write(SseEvent("[DONE]"));
  }
  return !exchange.client_gone();  // the listener writes the last chunk
}

}  // namespace

CompletionHandler::CompletionHandler(ServiceContext& service,
                                     const std::string& served_model)
    : service_(service), served_model_(served_model) {}

void CompletionHandler::Serve(OpenAiEndpoint endpoint,
                              const std::string& request_id,
                              const HttpRequest& http_request,
                              HttpResponse* response) {
  const bool chat = endpoint == OpenAiEndpoint::kChatCompletions;
  auto exchange = std::make_shared<Exchange>(
      service_, chat ? "OpenAI.ChatCompletions" : "OpenAI.Completions",
      request_id);
  auto fail = [&](const OpenAiError& e, grpc::StatusCode code) {
    exchange->record().Finish(grpc::Status(code, e.message), nullptr);
    ReplyError(response, e, request_id);
  };
  if (service_.draining.load()) {
    fail(ToOpenAiError(absl::UnavailableError("the server is draining"),
                       endpoint),
         grpc::StatusCode::UNAVAILABLE);
    return;
  }
  OpenAiRequest request;
  if (std::optional<OpenAiError> e = ParseOpenAiRequest(
          http_request.body, endpoint, served_model_, &request)) {
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
    // The answer starts as reasoning only when the prompt left a <think>
    // open; where the template lets the model open it, a model that never
    // does answers in `content`.
    const ChatTemplate& chat_template = oo.tokenizer->chat_template();
    oo.starts_in_reasoning =
        request.enable_thinking.value_or(chat_template.thinking_default()) &&
        chat_template.generation_opens_think();
  }
  if (absl::Status submitted =
          exchange->Submit(service_.engine, *std::move(converted),
                           service_.config->slow_readers,
                           std::move(oo),
                           ClientWatch(http_request.socket_fd));
      !submitted.ok()) {
    fail(ToOpenAiError(submitted, endpoint),
         ToGrpcStatus(submitted).error_code());
    return;
  }

  if (!request.stream) {
    // Waiting here, not in a stream writer, keeps the real status code:
    // the listener writes the status line before a writer runs.
    while (!exchange->done()) exchange->Pump(kWatchInterval);
    exchange->Finish();
    const OpenAiError error = exchange->Error(endpoint);
    if (error.http_status != 0) {
      ReplyError(response, error, request_id);
    } else {
      // A client that left gets this too; the write fails quietly.
      ReplyJson(response, 200, exchange->output().Complete(), request_id);
    }
    return;
  }
  response->status = 200;
  response->SetHeader("Cache-Control", "no-cache");
  response->SetHeader("X-Request-Id", request_id);
  response->content_type = "text/event-stream";
  const bool include_usage = request.include_usage;
  response->stream = [exchange, endpoint, include_usage](HttpBodyWriter& sink) {
    return WriteStream(*exchange, endpoint, include_usage, sink);
  };
  response->on_done = [exchange] { exchange->Finish(); };
}

}  // namespace tributary

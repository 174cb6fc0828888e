// The request side of the OpenAI-compatible HTTP API: a JSON body of
// /v1/completions or /v1/chat/completions becomes the v1.GenerateRequest
// that the gRPC API would get, so that RequestConverter validates both APIs
// with the same rules and limits (design.md §6); only the field names in its
// errors are rewritten to the OpenAI ones ("sampling.temperature" ->
// "temperature", "chat.messages[0].role" -> "messages[0].role").
//
// The errors are OpenAI's shape: {"error": {"message", "type", "param",
// "code"}} with an HTTP status. Pure functions; thread-safe.
#ifndef TRIBUTARY_SERVER_OPENAI_PROTOCOL_H_
#define TRIBUTARY_SERVER_OPENAI_PROTOCOL_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

enum class OpenAiEndpoint { kCompletions, kChatCompletions };

struct OpenAiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
  int retry_after_seconds = 0;  // > 0: a Retry-After header (429)

  nlohmann::json ToJson() const;
};

OpenAiError BadParam(const std::string& param, const std::string& message);

// What the HTTP layer needs beside the generate request.
struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  v1::GenerateRequest generate;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // completions: "logprobs": N; chat: "logprobs": true (+ "top_logprobs").
  bool logprobs = false;
  int top_logprobs = 0;
  // chat only: chat_template_kwargs.enable_thinking, when given.
  std::optional<bool> enable_thinking;
};

// Parses and checks the body's types and the OpenAI-only rules (model,
// n = 1, unsupported options); the ranges are RequestConverter's.
// `served_model` is the only model name accepted.
std::optional<OpenAiError> ParseOpenAiRequest(const std::string& body,
                                              OpenAiEndpoint endpoint,
                                              const std::string& served_model,
                                              OpenAiRequest* out);

// An error of RequestConverter or Engine::Submit as the OpenAI API reports
// it: INVALID_ARGUMENT -> 400 with the field renamed, RESOURCE_EXHAUSTED ->
// 429 (Retry-After), UNAVAILABLE -> 503, UNAUTHENTICATED -> 401, else 500.
OpenAiError ToOpenAiError(const absl::Status& status, OpenAiEndpoint endpoint);

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_OPENAI_PROTOCOL_H_

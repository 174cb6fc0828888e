// The response side of the OpenAI-compatible API: engine events become the
// JSON objects of /v1/completions ("text_completion") and
// /v1/chat/completions ("chat.completion" / "chat.completion.chunk").
//
// One OpenAiOutput per request. Add() every event in order; a streaming
// request then takes what was added since the last chunk (TakeChunk), a
// non-streaming one takes the whole response at the end (Complete). The two
// paths see the same text, so a streamed answer concatenates to the
// non-streamed one. Chat answers of a model with <think> in its vocabulary
// go through a ReasoningParser (`reasoning_content`). Not thread-safe: one
// connection thread uses it.
#ifndef TRIBUTARY_SERVER_OPENAI_RESPONSE_H_
#define TRIBUTARY_SERVER_OPENAI_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "engine/runtime/request.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/openai_protocol.h"
#include "server/reasoning_parser.h"

namespace tributary {

struct OpenAiOutputOptions {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  std::string id;     // "cmpl-…" / "chatcmpl-…"
  int64_t created = 0;  // Unix seconds
  std::string model;
  const Tokenizer* tokenizer = nullptr;  // may be null (no token texts)
  bool logprobs = false;
  // Chat only: split <think>…</think> (the model knows the tags), and
  // whether the prompt opened the block.
  bool parse_reasoning = false;
  bool starts_in_reasoning = false;
};

// "stop" or "length" (the API has no finer reasons; vLLM's `stop_reason`
// carries the matched string or token id).
const char* OpenAiFinishReason(FinishReason reason);

class OpenAiOutput {
 public:
  explicit OpenAiOutput(OpenAiOutputOptions options);

  void Add(const TokenEvent& event);

  // A chunk with what was added since the last call (the role first for
  // chat; the finish reason once the final event was added); nullopt when
  // there is nothing new to send.
  std::optional<nlohmann::json> TakeChunk();
  // The usage-only chunk of stream_options.include_usage (empty choices).
  nlohmann::json UsageChunk() const;
  // The whole non-streaming response (after the final event).
  nlohmann::json Complete();

 private:
  nlohmann::json Header(const char* object) const;
  nlohmann::json Usage() const;
  void AddLogprob(const TokenEvent& event);
  void FlushParser();

  OpenAiOutputOptions options_;
  std::optional<ReasoningParser> parser_;
  bool role_sent_ = false;
  bool finish_sent_ = false;
  // What the next chunk carries, and the whole answer so far.
  ReasoningDelta delta_;
  ReasoningDelta total_;
  nlohmann::json delta_logprobs_;  // chat: array; completions: object
  nlohmann::json total_logprobs_;
  int64_t text_offset_ = 0;
  // Set by the final event.
  bool final_ = false;
  std::optional<FinishReason> finish_reason_;
  nlohmann::json stop_reason_;
  TokenUsage usage_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_OPENAI_RESPONSE_H_

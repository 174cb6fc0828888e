#include "server/openai_response.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/tokenizer/utf8.h"

namespace tributary {
namespace {

using nlohmann::json;

struct TokenInfo {
  std::string text;  // valid UTF-8: as is; else "bytes:\xNN…" like OpenAI
  json bytes = json::array();
};

TokenInfo Describe(const Tokenizer* tokenizer, int32_t id) {
  TokenInfo info;
  if (tokenizer == nullptr) return info;
  absl::StatusOr<absl::string_view> raw = tokenizer->TokenBytes(id, false);
  if (!raw.ok()) return info;
  for (unsigned char c : *raw) info.bytes.push_back(static_cast<int>(c));
  if (ValidateUtf8(*raw).ok()) {
    info.text = std::string(*raw);
  } else {
    info.text = "bytes:";
    for (unsigned char c : *raw) {
      absl::StrAppend(&info.text, absl::StrFormat("\\x%02x", c));
    }
  }
  return info;
}

json EmptyLogprobs(OpenAiEndpoint endpoint) {
  if (endpoint == OpenAiEndpoint::kChatCompletions) {
    return json{{"content", json::array()}};
  }
  return json{{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
}

// Appends `from`'s entries to `to` (same shape).
void AppendLogprobs(const json& from, json* to) {
  for (auto it = from.begin(); it != from.end(); ++it) {
    for (const json& v : it.value()) (*to)[it.key()].push_back(v);
  }
}

}  // namespace

const char* OpenAiFinishReason(FinishReason reason) {
  return reason == FinishReason::kLength ? "length" : "stop";
}

OpenAiOutput::OpenAiOutput(OpenAiOutputOptions options)
    : options_(std::move(options)),
      delta_logprobs_(EmptyLogprobs(options_.endpoint)),
      total_logprobs_(EmptyLogprobs(options_.endpoint)) {
  if (options_.parse_reasoning) parser_.emplace(options_.starts_in_reasoning);
}

void OpenAiOutput::AddLogprob(const TokenEvent& event) {
  const TokenInfo token = Describe(options_.tokenizer, event.token_id);
  if (options_.endpoint == OpenAiEndpoint::kChatCompletions) {
    json top = json::array();
    for (const TokenLogprob& t : event.top_logprobs) {
      const TokenInfo info = Describe(options_.tokenizer, t.token_id);
      top.push_back({{"token", info.text},
                     {"logprob", t.logprob},
                     {"bytes", info.bytes}});
    }
    delta_logprobs_["content"].push_back({{"token", token.text},
                                          {"logprob", *event.logprob},
                                          {"bytes", token.bytes},
                                          {"top_logprobs", std::move(top)}});
    return;
  }
  json top = json::object();
  for (const TokenLogprob& t : event.top_logprobs) {
    top[Describe(options_.tokenizer, t.token_id).text] = t.logprob;
  }
  delta_logprobs_["tokens"].push_back(token.text);
  delta_logprobs_["token_logprobs"].push_back(*event.logprob);
  delta_logprobs_["top_logprobs"].push_back(std::move(top));
  delta_logprobs_["text_offset"].push_back(text_offset_);
  text_offset_ += static_cast<int64_t>(token.text.size());
}

void OpenAiOutput::Add(const TokenEvent& event) {
  if (parser_) {
    ReasoningDelta d = parser_->Feed(event.text);
    delta_.reasoning += d.reasoning;
    delta_.content += d.content;
  } else {
    delta_.content += event.text;
  }
  if (event.has_token && event.logprob && options_.logprobs) AddLogprob(event);
  if (!event.is_final) return;
  FlushParser();
  final_ = true;
  finish_reason_ = event.finish_reason;
  usage_ = event.usage;
  if (event.matched_stop_string) {
    stop_reason_ = *event.matched_stop_string;
  } else if (event.matched_token_id) {
    stop_reason_ = *event.matched_token_id;
  }
}

void OpenAiOutput::FlushParser() {
  if (!parser_) return;
  ReasoningDelta d = parser_->Finish();
  delta_.reasoning += d.reasoning;
  delta_.content += d.content;
}

json OpenAiOutput::Header(const char* object) const {
  return json{{"id", options_.id},
              {"object", object},
              {"created", options_.created},
              {"model", options_.model}};
}

json OpenAiOutput::Usage() const {
  return json{{"prompt_tokens", usage_.num_prompt_tokens},
              {"completion_tokens", usage_.num_generated_tokens},
              {"total_tokens",
               usage_.num_prompt_tokens + usage_.num_generated_tokens}};
}

std::optional<json> OpenAiOutput::TakeChunk() {
  const bool chat = options_.endpoint == OpenAiEndpoint::kChatCompletions;
  const bool has_logprobs =
      !delta_logprobs_[chat ? "content" : "tokens"].empty();
  const bool send_finish = final_ && !finish_sent_;
  if (delta_.content.empty() && delta_.reasoning.empty() && !has_logprobs &&
      !send_finish && (role_sent_ || !chat)) {
    return std::nullopt;
  }
  json choice{{"index", 0}};
  if (chat) {
    json delta = json::object();
    if (!role_sent_) delta["role"] = "assistant";
    if (!delta_.reasoning.empty()) delta["reasoning_content"] = delta_.reasoning;
    if (!delta_.content.empty() || !role_sent_) delta["content"] = delta_.content;
    choice["delta"] = std::move(delta);
    role_sent_ = true;
  } else {
    choice["text"] = delta_.content;
  }
  choice["logprobs"] = options_.logprobs && has_logprobs ? delta_logprobs_ : json();
  choice["finish_reason"] =
      send_finish && finish_reason_ ? json(OpenAiFinishReason(*finish_reason_))
                                    : json();
  if (send_finish) {
    choice["stop_reason"] = stop_reason_;
    finish_sent_ = true;
  }
  AppendLogprobs(delta_logprobs_, &total_logprobs_);
  total_.content += delta_.content;
  total_.reasoning += delta_.reasoning;
  delta_ = ReasoningDelta();
  delta_logprobs_ = EmptyLogprobs(options_.endpoint);
  json chunk = Header(chat ? "chat.completion.chunk" : "text_completion");
  chunk["choices"] = json::array({std::move(choice)});
  return chunk;
}

json OpenAiOutput::UsageChunk() const {
  const bool chat = options_.endpoint == OpenAiEndpoint::kChatCompletions;
  json chunk = Header(chat ? "chat.completion.chunk" : "text_completion");
  chunk["choices"] = json::array();
  chunk["usage"] = Usage();
  return chunk;
}

json OpenAiOutput::Complete() {
  const bool chat = options_.endpoint == OpenAiEndpoint::kChatCompletions;
  AppendLogprobs(delta_logprobs_, &total_logprobs_);
  total_.content += delta_.content;
  total_.reasoning += delta_.reasoning;
  delta_ = ReasoningDelta();
  delta_logprobs_ = EmptyLogprobs(options_.endpoint);
  json choice{{"index", 0}};
  if (chat) {
    json message{{"role", "assistant"}, {"content", total_.content}};
    if (parser_) {
      message["reasoning_content"] =
          total_.reasoning.empty() ? json() : json(total_.reasoning);
    }
    choice["message"] = std::move(message);
  } else {
    choice["text"] = total_.content;
  }
  choice["logprobs"] = options_.logprobs ? total_logprobs_ : json();
  choice["finish_reason"] =
      finish_reason_ ? json(OpenAiFinishReason(*finish_reason_)) : json();
  choice["stop_reason"] = stop_reason_;
  json response = Header(chat ? "chat.completion" : "text_completion");
  response["choices"] = json::array({std::move(choice)});
  response["usage"] = Usage();
  return response;
}

}  // namespace tributary

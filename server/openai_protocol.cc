#include "server/openai_protocol.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace tributary {
namespace {

using nlohmann::json;

const char* TypeName(const json& v) {
  // "number" for every numeric kind: the client does not care which.
  return v.is_number() ? "number" : v.type_name();
}

OpenAiError WrongType(const std::string& param, const char* expected,
                      const json& v) {
  return BadParam(param, absl::StrCat(param, ": expected ", expected,
                                      ", got ", TypeName(v)));
}

// The field, or null when absent or JSON null (OpenAI treats both as unset).
const json* Field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<OpenAiError> GetFloat(const json& body, const char* name,
                                    std::optional<float>* out) {
  out->reset();  // the out variables are reused
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return WrongType(name, "a number", *v);
  *out = static_cast<float>(v->get<double>());
  return std::nullopt;
}

// An integer in [lo, hi]; 2.0 is accepted (JSON has one number type), 2.5
// is not.
std::optional<OpenAiError> GetInt(const json& body, const char* name,
                                  int64_t lo, int64_t hi,
                                  std::optional<int64_t>* out) {
  out->reset();  // the out variables are reused
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  int64_t value = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() &&
        v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
      return BadParam(name, absl::StrCat(name, " = ", v->dump(),
                                         " is above the maximum ", hi));
    }
    value = v->get<int64_t>();
  } else if (v->is_number_float() && std::trunc(v->get<double>()) ==
                                         v->get<double>() &&
             std::fabs(v->get<double>()) < 9e15) {
    value = static_cast<int64_t>(v->get<double>());
  } else {
    return WrongType(name, "an integer", *v);
  }
  if (value < lo || value > hi) {
    return BadParam(name, absl::StrCat(name, " = ", value, " must be in [",
                                       lo, ", ", hi, "]"));
  }
  *out = value;
  return std::nullopt;
}

std::optional<OpenAiError> GetBool(const json& body, const char* name,
                                   std::optional<bool>* out) {
  out->reset();  // the out variables are reused
  const json* v = Field(body, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return WrongType(name, "a boolean", *v);
  *out = v->get<bool>();
  return std::nullopt;
}

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

std::optional<OpenAiError> ParsePrompt(const json& body, v1::GenerateRequest* g) {
  const json* prompt = Field(body, "prompt");
  if (prompt == nullptr) return BadParam("prompt", "prompt is required");
  if (prompt->is_string()) {
    g->set_text(prompt->get<std::string>());
    return std::nullopt;
  }
  if (!prompt->is_array()) return WrongType("prompt", "a string", *prompt);
  if (prompt->size() == 1 && (*prompt)[0].is_string()) {
    g->set_text((*prompt)[0].get<std::string>());
    return std::nullopt;
  }
  // A list of token ids; a list of several prompts (a batch) is not
  // supported, like n > 1.
  for (size_t i = 0; i < prompt->size(); ++i) {
    const json& id = (*prompt)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > kInt32Max) {
      return BadParam("prompt",
                      "prompt: expected a string, one string in a list, or a "
                      "list of token ids (batches of prompts are not "
                      "supported)");
    }
    g->mutable_token_ids()->add_ids(static_cast<int32_t>(id.get<int64_t>()));
  }
  return std::nullopt;
}

// "content": a string, or the list-of-parts form with text parts only.
std::optional<OpenAiError> ParseContent(const json& content,
                                        const std::string& field,
                                        std::string* out) {
  if (content.is_null()) return std::nullopt;
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return WrongType(field, "a string", content);
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string pf = absl::StrCat(field, "[", i, "]");
    if (!part.is_object() || part.value("type", json()) != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      return BadParam(pf, pf + ": only {\"type\": \"text\", \"text\": ...} "
                                "parts are supported");
    }
    out->append(part["text"].get<std::string>());
  }
  return std::nullopt;
}

std::optional<OpenAiError> ParseMessages(const json& body, v1::ChatInput* chat) {
  const json* messages = Field(body, "messages");
  if (messages == nullptr) return BadParam("messages", "messages is required");
  if (!messages->is_array()) return WrongType("messages", "an array", *messages);
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string field = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return WrongType(field, "an object", m);
    v1::ChatMessage* out = chat->add_messages();
    const json* role = Field(m, "role");
    if (role == nullptr) return BadParam(field + ".role", field + ".role is required");
    if (!role->is_string()) return WrongType(field + ".role", "a string", *role);
    // OpenAI's newer name for the system role.
    out->set_role(*role == "developer" ? "system" : role->get<std::string>());
    if (m.contains("content")) {
      if (auto e = ParseContent(m["content"], field + ".content",
                                out->mutable_content())) {
        return e;
      }
    }
    if (const json* r = Field(m, "reasoning_content")) {
      if (!r->is_string()) {
        return WrongType(field + ".reasoning_content", "a string", *r);
      }
      out->set_reasoning_content(r->get<std::string>());
    }
  }
  return std::nullopt;
}

std::optional<OpenAiError> ParseStop(const json& body, v1::StoppingOptions* s) {
  const json* stop = Field(body, "stop");
  if (stop == nullptr) return std::nullopt;
  if (stop->is_string()) {
    s->add_stop(stop->get<std::string>());
    return std::nullopt;
  }
  if (!stop->is_array()) return WrongType("stop", "a string or an array", *stop);
  for (const json& one : *stop) {
    if (!one.is_string()) return WrongType("stop", "an array of strings", one);
    s->add_stop(one.get<std::string>());
  }
  return std::nullopt;
}

// Options this server does not implement: refused rather than ignored, so
// that a client never gets silently different output.
std::optional<OpenAiError> RefuseUnsupported(const json& body) {
  std::optional<int64_t> n, best_of;
  if (auto e = GetInt(body, "n", 1, kInt32Max, &n)) return e;
  if (n && *n != 1) {
    return BadParam("n", absl::StrCat("n = ", *n, ": only n = 1 is supported"));
  }
  if (auto e = GetInt(body, "best_of", 1, kInt32Max, &best_of)) return e;
  if (best_of && *best_of != 1) {
    return BadParam("best_of", "best_of: only 1 is supported");
  }
  std::optional<bool> echo;
  if (auto e = GetBool(body, "echo", &echo)) return e;
  if (echo.value_or(false)) return BadParam("echo", "echo is not supported");
  for (const char* name : {"suffix", "tools", "functions", "logit_bias"}) {
    const json* v = Field(body, name);
    if (v != nullptr && !(v->is_object() && v->empty()) &&
        !(v->is_array() && v->empty())) {
      return BadParam(name, absl::StrCat(name, " is not supported"));
    }
  }
  if (const json* f = Field(body, "response_format")) {
    if (!f->is_object() || f->value("type", json()) != "text") {
      return BadParam("response_format",
                      "response_format: only {\"type\": \"text\"} is supported");
    }
  }
  return std::nullopt;
}

std::optional<OpenAiError> ParseSampling(const json& body,
                                         v1::SamplingOptions* s) {
  struct FloatField {
    const char* name;
    void (v1::SamplingOptions::*set)(float);
  };
  static const FloatField kFloats[] = {
      {"temperature", &v1::SamplingOptions::set_temperature},
      {"top_p", &v1::SamplingOptions::set_top_p},
      {"min_p", &v1::SamplingOptions::set_min_p},
      {"repetition_penalty", &v1::SamplingOptions::set_repetition_penalty},
      {"presence_penalty", &v1::SamplingOptions::set_presence_penalty},
      {"frequency_penalty", &v1::SamplingOptions::set_frequency_penalty},
  };
  for (const FloatField& f : kFloats) {
    std::optional<float> v;
    if (auto e = GetFloat(body, f.name, &v)) return e;
    if (v) (s->*f.set)(*v);
  }
  std::optional<int64_t> top_k, seed;
  // vLLM's convention: -1 (or 0) turns top-k off.
  if (auto e = GetInt(body, "top_k", -1, kInt32Max, &top_k)) return e;
  if (top_k) s->set_top_k(*top_k < 0 ? 0 : static_cast<int32_t>(*top_k));
  if (auto e = GetInt(body, "seed", std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max(), &seed)) {
    return e;
  }
  // A negative seed is a valid seed too: the same bits as uint64.
  if (seed) s->set_seed(static_cast<uint64_t>(*seed));
  return std::nullopt;
}

}  // namespace

json OpenAiError::ToJson() const {
  json e;
  e["message"] = message;
  e["type"] = type;
  e["param"] = param.empty() ? json() : json(param);
  e["code"] = code.empty() ? json() : json(code);
  return json{{"error", std::move(e)}};
}

OpenAiError BadParam(const std::string& param, const std::string& message) {
  OpenAiError e;
  e.http_status = 400;
  e.param = param;
  e.message = message;
  return e;
}

std::optional<OpenAiError> ParseOpenAiRequest(const std::string& body_text,
                                              OpenAiEndpoint endpoint,
                                              const std::string& served_model,
                                              OpenAiRequest* out) {
  // JSON has no raw NUL (not as whitespace, not in a string), but the
  // parser stops at one and would take "{...}\0garbage" for "{...}".
  if (body_text.find('\0') != std::string::npos) {
    return BadParam("", "the body is not valid JSON (it holds a NUL byte)");
  }
  const json body = json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    return BadParam("", "the body is not valid JSON (or not valid UTF-8)");
  }
  if (!body.is_object()) return BadParam("", "the body must be a JSON object");
  out->endpoint = endpoint;
  const json* model = Field(body, "model");
  if (model == nullptr) return BadParam("model", "model is required");
  if (!model->is_string()) return WrongType("model", "a string", *model);
  if (*model != served_model) {
    OpenAiError e;
    e.http_status = 404;
    e.param = "model";
    e.code = "model_not_found";
    e.message = absl::StrCat("the model \"", Utf8Excerpt(model->get<std::string>(), 64),
                             "\" does not exist; this server serves \"",
                             served_model, "\"");
    return e;
  }
  if (auto e = RefuseUnsupported(body)) return e;

  v1::GenerateRequest& g = out->generate;
  const bool chat = endpoint == OpenAiEndpoint::kChatCompletions;
  if (chat) {
    if (auto e = ParseMessages(body, g.mutable_chat())) return e;
  } else {
    if (auto e = ParsePrompt(body, &g)) return e;
  }
  if (auto e = ParseSampling(body, g.mutable_sampling())) return e;

  v1::StoppingOptions* st = g.mutable_stopping();
  std::optional<int64_t> max_tokens;
  const char* max_name =
      chat && Field(body, "max_completion_tokens") != nullptr
          ? "max_completion_tokens"
          : "max_tokens";
  if (auto e = GetInt(body, max_name, 1, kInt32Max, &max_tokens)) return e;
  if (max_tokens) st->set_max_new_tokens(static_cast<int32_t>(*max_tokens));
  if (auto e = ParseStop(body, st)) return e;
  std::optional<bool> flag;
  if (auto e = GetBool(body, "ignore_eos", &flag)) return e;
  if (flag) st->set_ignore_eos(*flag);
  if (auto e = GetBool(body, "include_stop_str_in_output", &flag)) return e;
  if (flag) st->set_include_stop_string_in_output(*flag);
  if (const json* ids = Field(body, "stop_token_ids")) {
    if (!ids->is_array()) return WrongType("stop_token_ids", "an array", *ids);
    for (const json& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > kInt32Max) {
        return BadParam("stop_token_ids",
                        "stop_token_ids: expected non-negative integers");
      }
      st->add_stop_token_ids(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  v1::ResponseOptions* r = g.mutable_response();
  if (auto e = GetBool(body, "skip_special_tokens", &flag)) return e;
  if (flag) r->set_include_special_tokens(!*flag);

  // Logprobs: completions "logprobs": N (the top N); chat "logprobs": true
  // and "top_logprobs": N. The range is the converter's.
  std::optional<int64_t> top;
  if (chat) {
    if (auto e = GetBool(body, "logprobs", &flag)) return e;
    out->logprobs = flag.value_or(false);
    if (auto e = GetInt(body, "top_logprobs", 0, kInt32Max, &top)) return e;
  } else {
    if (auto e = GetInt(body, "logprobs", 0, kInt32Max, &top)) return e;
    out->logprobs = top.has_value();
  }
  out->top_logprobs = static_cast<int>(top.value_or(0));
  r->set_logprobs(out->logprobs);
  r->set_top_logprobs(out->top_logprobs);

  if (auto e = GetBool(body, "stream", &flag)) return e;
  out->stream = flag.value_or(false);
  if (const json* so = Field(body, "stream_options")) {
    if (!so->is_object()) return WrongType("stream_options", "an object", *so);
    if (!out->stream) {
      return BadParam("stream_options",
                      "stream_options is only allowed with stream = true");
    }
    std::optional<bool> usage;
    if (auto e = GetBool(*so, "include_usage", &usage)) {
      e->param = "stream_options.include_usage";
      return e;
    }
    out->include_usage = usage.value_or(false);
  }
  if (chat) {
    if (const json* kw = Field(body, "chat_template_kwargs")) {
      if (!kw->is_object()) {
        return WrongType("chat_template_kwargs", "an object", *kw);
      }
      std::optional<bool> thinking;
      if (auto e = GetBool(*kw, "enable_thinking", &thinking)) {
        e->param = "chat_template_kwargs.enable_thinking";
        return e;
      }
      if (thinking) {
        out->enable_thinking = thinking;
        g.mutable_chat()->set_enable_thinking(*thinking);
      }
    }
  }
  return std::nullopt;
}

OpenAiError ToOpenAiError(const absl::Status& status, OpenAiEndpoint endpoint) {
  OpenAiError e;
  e.message = std::string(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      break;
    case absl::StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "queue_full";
      e.retry_after_seconds = 1;
      return e;
    case absl::StatusCode::kUnavailable:
      e.http_status = 503;
      e.type = "service_unavailable";
      return e;
    case absl::StatusCode::kUnauthenticated:
      e.http_status = 401;
      e.type = "authentication_error";
      e.code = "invalid_api_key";
      return e;
    default:
      e.http_status = 500;
      e.type = "internal_error";
      return e;
  }
  // The converter names proto fields; the OpenAI names replace them.
  const bool chat = endpoint == OpenAiEndpoint::kChatCompletions;
  const std::pair<const char*, const char*> kNames[] = {
      {"sampling.", ""},
      {"stopping.max_new_tokens", "max_tokens"},
      {"stopping.stop_token_ids", "stop_token_ids"},
      {"stopping.stop", "stop"},
      {"max_new_tokens", "max_tokens"},  // the engine's own checks
      {"response.top_logprobs", chat ? "top_logprobs" : "logprobs"},
      {"chat.messages", "messages"},
      {"chat", "messages"},
      {"token_ids.ids", "prompt"},
      {"token_ids", "prompt"},
      {"text", "prompt"},
  };
  for (const auto& [proto, openai] : kNames) {
    if (!absl::StartsWith(e.message, proto)) continue;
    e.message = absl::StrCat(openai, e.message.substr(strlen(proto)));
    break;
  }
  // The parameter: the message's leading field path, up to " " or ":".
  const size_t end = e.message.find_first_of(" :");
  const std::string head = e.message.substr(0, end);
  if (!head.empty() && head.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyz_[]0123456789.") ==
                           std::string::npos) {
    e.param = head;
  }
  return e;
}

}  // namespace tributary

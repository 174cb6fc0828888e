#include "server/request_converter.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "engine/tokenizer/utf8.h"
#include "base/status_macros.h"

namespace tributary {
namespace {

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

// The engine's vectors are the API's Direction messages: "steering[i].vector"
// is steering[i].direction.inline_vector (with its values), "ablate[i]" an
// ablate[i] Direction, whose element j is ablate[i].inline_vector.values[j].
std::string VectorPathsInProto(absl::string_view message) {
  std::string out = absl::StrReplaceAll(
      message, {{"].vector[", "].direction.inline_vector.values["},
                {"].vector has", "].direction.inline_vector has"}});
  const std::string kAblate = "ablate[";
  std::string result;
  size_t at = 0;
  while (true) {
    const size_t found = out.find(kAblate, at);
    const size_t close =
        found == std::string::npos ? found : out.find(']', found + kAblate.size());
    if (close == std::string::npos) break;
    result.append(out, at, close + 1 - at);
    at = close + 1;
    if (out.compare(at, 1, "[") == 0) {
      result += ".inline_vector.values";
    } else if (out.compare(at, 5, " has ") == 0 &&
               out.find(" values", at) != std::string::npos) {
      result += ".inline_vector";
    }
  }
  result.append(out, at, std::string::npos);
  return result;
}

}  // namespace

absl::Status WithProtoFieldName(const absl::Status& status) {
  if (status.ok() || status.code() != absl::StatusCode::kInvalidArgument) {
    return status;
  }
  if (absl::StrContains(status.message(), "steering[") ||
      absl::StrContains(status.message(), "ablate[")) {
    return Invalid(VectorPathsInProto(status.message()));
  }
  static const std::pair<const char*, const char*> kPaths[] = {
      {"temperature", "sampling."},       {"top_k", "sampling."},
      {"top_p", "sampling."},             {"min_p", "sampling."},
      {"repetition_penalty", "sampling."}, {"presence_penalty", "sampling."},
      {"frequency_penalty", "sampling."}, {"max_new_tokens", "stopping."},
      {"stop_token_ids", "stopping."},
  };
  const absl::string_view message = status.message();
  for (const auto& [field, prefix] : kPaths) {
    if (absl::StartsWith(message, field)) {
      return Invalid(absl::StrCat(prefix, message));
    }
  }
  if (absl::StartsWith(message, "stop_strings")) {
    return Invalid(absl::StrCat("stopping.stop",
                                message.substr(sizeof("stop_strings") - 1)));
  }
  if (absl::StartsWith(message, "num_logprobs")) {
    return Invalid(absl::StrCat("response.top_logprobs",
                                message.substr(sizeof("num_logprobs") - 1)));
  }
  return status;
}

namespace {

v1::FinishReason FinishReasonToProto(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case FinishReason::kStop: return v1::FINISH_REASON_STOP;
    case FinishReason::kStopToken: return v1::FINISH_REASON_STOP_TOKEN;
    case FinishReason::kStopString: return v1::FINISH_REASON_STOP_STRING;
    case FinishReason::kCancelled: break;  // never sent: the RPC ends CANCELLED
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

// A token's text for display: as is when it is valid UTF-8 on its own,
// else its bytes as <0xNN> (a proto string must be valid UTF-8).
std::string TokenText(const Tokenizer* tokenizer, int32_t id) {
  if (tokenizer == nullptr) return "";
  absl::StatusOr<absl::string_view> bytes = tokenizer->TokenBytes(id, false);
  if (!bytes.ok()) return "";
  if (ValidateUtf8(*bytes).ok()) return std::string(*bytes);
  std::string out;
  for (unsigned char c : *bytes) {
    absl::StrAppend(&out, absl::StrFormat("<0x%02X>", c));
  }
  return out;
}

void SetMeanMax(double mean, double max, v1::MeanMax* out) {
  out->set_mean(mean);
  out->set_max(max);
}

}  // namespace

RequestConverter::RequestConverter(const ModelConfig& config,
                                   const Tokenizer* tokenizer,
                                   ConversionLimits limits,
                                   const VectorLibrary* vectors)
    : config_(config), tokenizer_(tokenizer), limits_(limits), vectors_(vectors) {}

absl::StatusOr<std::vector<float>> RequestConverter::ResolveDirection(
    const v1::Direction& direction, const std::string& field) const {
  switch (direction.source_case()) {
    case v1::Direction::kInlineVector: {
      const auto& values = direction.inline_vector().values();
      if (values.size() != config_.hidden_size) {
        return Invalid(absl::StrCat(field, ".inline_vector has ",
                                    values.size(),
                                    " values; the hidden size is ",
                                    config_.hidden_size));
      }
      return std::vector<float>(values.begin(), values.end());
    }
    case v1::Direction::kName: {
      const std::vector<float>* v =
          vectors_ != nullptr ? vectors_->Find(direction.name()) : nullptr;
      if (v == nullptr) {
        return Invalid(absl::StrCat(
            field, ".name = \"", Utf8Excerpt(direction.name(), 64),
            "\" is not a loaded vector (GetModelInfo.steering_vector_names)"));
      }
      return *v;
    }
    case v1::Direction::SOURCE_NOT_SET:
      break;
  }
  return Invalid(absl::StrCat(field, ": set inline_vector or name"));
}

absl::Status RequestConverter::ConvertInterventions(
    const v1::GenerateRequest& request, GenerateRequest* out) const {
  // Counts first: the vectors are not copied for a request refused anyway.
  if (request.steering_size() > GenerateRequest::kMaxSteeringVectors) {
    return Invalid(absl::StrCat("steering has ", request.steering_size(),
                                " entries, at most ",
                                GenerateRequest::kMaxSteeringVectors));
  }
  if (request.ablate_size() > GenerateRequest::kMaxAblations) {
    return Invalid(absl::StrCat("ablate has ", request.ablate_size(),
                                " directions, at most ",
                                GenerateRequest::kMaxAblations));
  }
  for (int i = 0; i < request.steering_size(); ++i) {
    const v1::Steering& s = request.steering(i);
    const std::string field = absl::StrCat("steering[", i, "]");
    // proto3 enums are open: a value no name stands for arrives as itself,
    // and would otherwise act as whichever branch the comparison falls to.
    if (!v1::StreamPoint_IsValid(s.point())) {
      return Invalid(absl::StrCat(field, ".point = ", s.point(),
                                  ": not a StreamPoint (0 after the ffn, 1 "
                                  "after the mixer)"));
    }
    if (!v1::TokenScope_IsValid(s.tokens())) {
      return Invalid(absl::StrCat(field, ".tokens = ", s.tokens(),
                                  ": not a TokenScope (0 all tokens, 1 "
                                  "generated only)"));
    }
    SteeringVector sv;
    sv.layer = s.layer();
    sv.after_ffn = s.point() == v1::STREAM_POINT_AFTER_FFN;
    ASSIGN_OR_RETURN(sv.vector,
                     ResolveDirection(s.direction(), field + ".direction"));
    sv.scale = s.has_scale() ? s.scale() : 1.0f;
    sv.generated_only = s.tokens() == v1::TOKEN_SCOPE_GENERATED;
    out->steering.push_back(std::move(sv));
  }
  for (int i = 0; i < request.ablate_size(); ++i) {
    ASSIGN_OR_RETURN(std::vector<float> d,
                     ResolveDirection(request.ablate(i),
                                      absl::StrCat("ablate[", i, "]")));
    out->ablate.push_back(std::move(d));
  }
  out->skip_layers.assign(request.skip_layers().begin(),
                          request.skip_layers().end());
  if (request.has_logit_lens()) {
    const v1::LogitLens& lens = request.logit_lens();
    LogitLensOptions options;
    options.layers.assign(lens.layers().begin(), lens.layers().end());
    options.top_n = lens.top_n() == 0 ? 5 : lens.top_n();
    options.include_prompt = lens.include_prompt();
    out->logit_lens = std::move(options);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> RequestConverter::CheckPromptLength(
    std::vector<int32_t> ids, const char* field) const {
  if (ids.empty()) {
    return Invalid(absl::StrCat(field, ": the prompt is empty"));
  }
  if (static_cast<int64_t>(ids.size()) > limits_.max_prompt_tokens) {
    return Invalid(absl::StrCat(field, ": the prompt has ", ids.size(),
                                " tokens, more than max_prompt_tokens = ",
                                limits_.max_prompt_tokens));
  }
  return ids;
}

absl::StatusOr<std::vector<int32_t>> RequestConverter::EncodeText(
    const std::string& text) const {
  if (tokenizer_ == nullptr) {
    return Invalid("text: this model has no tokenizer; send token_ids");
  }
  if (text.empty()) return Invalid("text: the prompt is empty");
  // The text is at most --max-message-bytes long (gRPC refuses bigger
  // messages), which bounds the work of encoding it.
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer_->Encode(text);
  if (!ids.ok()) return Invalid(absl::StrCat("text: ", ids.status().message()));
  return CheckPromptLength(*std::move(ids), "text");
}

absl::StatusOr<std::vector<int32_t>> RequestConverter::EncodeChat(
    const v1::ChatInput& chat) const {
  if (tokenizer_ == nullptr) {
    return Invalid("chat: this model has no tokenizer; send token_ids");
  }
  if (chat.messages_size() == 0) {
    return Invalid("chat.messages: at least one message is required");
  }
  if (chat.messages_size() > ConversionLimits::kMaxChatMessages) {
    return Invalid(absl::StrCat("chat.messages: ", chat.messages_size(),
                                " messages, at most ",
                                ConversionLimits::kMaxChatMessages));
  }
  std::vector<ChatMessage> messages;
  messages.reserve(static_cast<size_t>(chat.messages_size()));
  for (int i = 0; i < chat.messages_size(); ++i) {
    const v1::ChatMessage& m = chat.messages(i);
    if (m.role() != "system" && m.role() != "user" && m.role() != "assistant") {
      return Invalid(absl::StrCat("chat.messages[", i, "].role = \"",
                                  Utf8Excerpt(m.role(), 32),
                                  "\" must be system, user or assistant"));
    }
    ChatMessage message{m.role(), m.content(), std::nullopt};
    if (m.has_reasoning_content()) {
      message.reasoning_content = m.reasoning_content();
    }
    messages.push_back(std::move(message));
  }
  ChatOptions options;
  options.add_generation_prompt = true;
  if (chat.has_enable_thinking()) options.enable_thinking = chat.enable_thinking();
  absl::StatusOr<std::vector<int32_t>> ids =
      tokenizer_->EncodeChat(messages, options);
  if (!ids.ok()) return Invalid(absl::StrCat("chat: ", ids.status().message()));
  return CheckPromptLength(*std::move(ids), "chat");
}

absl::StatusOr<GenerateRequest> RequestConverter::ToEngine(
    const v1::GenerateRequest& request) const {
  GenerateRequest out;
  switch (request.input_case()) {
    case v1::GenerateRequest::kText: {
      ASSIGN_OR_RETURN(out.prompt_ids, EncodeText(request.text()));
      break;
    }
    case v1::GenerateRequest::kTokenIds: {
      const auto& ids = request.token_ids().ids();
      for (int i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= config_.vocab_size) {
          return Invalid(absl::StrCat("token_ids.ids[", i, "] = ", ids[i],
                                      " is outside the vocabulary [0, ",
                                      config_.vocab_size, ")"));
        }
      }
      ASSIGN_OR_RETURN(out.prompt_ids,
                       CheckPromptLength({ids.begin(), ids.end()}, "token_ids"));
      break;
    }
    case v1::GenerateRequest::kChat: {
      ASSIGN_OR_RETURN(out.prompt_ids, EncodeChat(request.chat()));
      break;
    }
    case v1::GenerateRequest::INPUT_NOT_SET:
      return Invalid("input: one of text, token_ids or chat is required");
  }

  const v1::SamplingOptions& s = request.sampling();
  SamplingParams& p = out.sampling;
  if (s.has_temperature()) p.temperature = s.temperature();
  if (s.has_top_k()) p.top_k = s.top_k();
  if (s.has_top_p()) p.top_p = s.top_p();
  if (s.has_min_p()) p.min_p = s.min_p();
  if (s.has_repetition_penalty()) p.repetition_penalty = s.repetition_penalty();
  if (s.has_presence_penalty()) p.presence_penalty = s.presence_penalty();
  if (s.has_frequency_penalty()) p.frequency_penalty = s.frequency_penalty();
  if (s.has_seed()) p.seed = s.seed();

  const v1::StoppingOptions& st = request.stopping();
  if (st.has_max_new_tokens()) {
    if (st.max_new_tokens() > limits_.max_new_tokens) {
      return Invalid(absl::StrCat("stopping.max_new_tokens = ",
                                  st.max_new_tokens(),
                                  " is above the server's limit of ",
                                  limits_.max_new_tokens));
    }
    p.max_new_tokens = st.max_new_tokens();
  }
  if (st.stop_size() > SamplingParams::kMaxNumStopStrings) {
    return Invalid(absl::StrCat("stopping.stop has ", st.stop_size(),
                                " strings, at most ",
                                SamplingParams::kMaxNumStopStrings));
  }
  p.stop_strings.assign(st.stop().begin(), st.stop().end());
  p.include_stop_string_in_output = st.include_stop_string_in_output();
  if (st.stop_token_ids_size() > SamplingParams::kMaxNumStopTokenIds) {
    return Invalid(absl::StrCat("stopping.stop_token_ids has ",
                                st.stop_token_ids_size(), " ids, at most ",
                                SamplingParams::kMaxNumStopTokenIds));
  }
  p.stop_token_ids.assign(st.stop_token_ids().begin(),
                          st.stop_token_ids().end());
  p.ignore_eos = st.ignore_eos();

  const v1::ResponseOptions& r = request.response();
  if (r.top_logprobs() != 0 && !r.logprobs()) {
    return Invalid(absl::StrCat("response.top_logprobs = ", r.top_logprobs(),
                                " needs response.logprobs"));
  }
  if (r.logprobs()) p.num_logprobs = r.top_logprobs();
  out.skip_special_tokens = !r.include_special_tokens();
  out.residual_trace = r.residual_trace();
  out.residual_summary = r.residual_summary();

  if (request.priority() < -ConversionLimits::kMaxPriority ||
      request.priority() > ConversionLimits::kMaxPriority) {
    return Invalid(absl::StrCat("priority = ", request.priority(),
                                " must be in [-", ConversionLimits::kMaxPriority,
                                ", ", ConversionLimits::kMaxPriority, "]"));
  }
  out.priority = request.priority();
  RETURN_IF_ERROR(ConvertInterventions(request, &out));

  RETURN_IF_ERROR(WithProtoFieldName(p.Validate()));
  RETURN_IF_ERROR(WithProtoFieldName(
      p.ValidateTokenIds(static_cast<int32_t>(config_.vocab_size))));
  return out;
}

void RequestConverter::AppendEvent(const TokenEvent& event,
                                   const v1::ResponseOptions& options,
                                   v1::GenerateResponse* out) const {
  out->mutable_text()->append(event.text);
  if (event.has_token) {
    if (options.return_token_ids()) out->add_token_ids(event.token_id);
    if (event.logprob) {
      v1::TokenLogprob* lp = out->add_logprobs();
      lp->set_token_id(event.token_id);
      lp->set_logprob(*event.logprob);
      for (const TokenLogprob& top : event.top_logprobs) {
        v1::TopLogprob* t = lp->add_top();
        t->set_token_id(top.token_id);
        t->set_logprob(top.logprob);
        t->set_text(TokenText(tokenizer_, top.token_id));
      }
    }
  }
  for (const LensReading& reading : event.logit_lens) {
    v1::LensReading* r = out->add_logit_lens();
    r->set_position(static_cast<int32_t>(reading.position));
    r->set_layer(reading.layer);
    for (const TokenLogprob& t : reading.top) {
      v1::TopLogprob* top = r->add_top();
      top->set_token_id(t.token_id);
      top->set_logprob(t.logprob);
      top->set_text(TokenText(tokenizer_, t.token_id));
    }
  }
  for (const ResidualTraceToken& token : event.residual_trace) {
    v1::ResidualTraceToken* t = out->add_residual_trace();
    t->set_position(static_cast<int32_t>(token.position));
    t->mutable_norms()->Add(token.norms.begin(), token.norms.end());
  }
  if (!event.is_final) return;
  if (event.finish_reason) out->set_finish_reason(FinishReasonToProto(*event.finish_reason));
  if (event.matched_token_id) {
    out->set_matched_stop_token_id(*event.matched_token_id);
  }
  if (event.matched_stop_string) {
    out->set_matched_stop_string(*event.matched_stop_string);
  }
  out->mutable_usage()->set_prompt_tokens(
      static_cast<int32_t>(event.usage.num_prompt_tokens));
  out->mutable_usage()->set_generated_tokens(
      static_cast<int32_t>(event.usage.num_generated_tokens));
  out->mutable_timing()->set_queue_seconds(event.timing.queue_seconds);
  out->mutable_timing()->set_time_to_first_token_seconds(
      event.timing.time_to_first_token_seconds);
  out->mutable_timing()->set_total_seconds(event.timing.total_seconds);
  if (event.residual_summary) {
    ToProto(*event.residual_summary, 0.0, out->mutable_residual_summary());
  }
}

void RequestConverter::ToProto(const ResidualSummary& summary,
                               double window_seconds,
                               v1::ResidualStats* out) const {
  out->set_window_seconds(window_seconds);
  for (int layer = 0; layer < summary.num_layers(); ++layer) {
    const bool full =
        static_cast<size_t>(layer) < config_.layer_types.size() &&
        config_.layer_types[static_cast<size_t>(layer)] ==
            LayerKind::kFullAttention;
    for (Sublayer sub : {Sublayer::kMixer, Sublayer::kFfn}) {
      const SublayerAccumulator& a = summary.at(layer, sub);
      v1::SublayerResidualStats* s = out->add_sublayers();
      s->set_layer(layer);
      s->set_sublayer(sub == Sublayer::kMixer ? v1::SUBLAYER_MIXER
                                              : v1::SUBLAYER_FFN);
      s->set_kind(full ? v1::LAYER_KIND_FULL_ATTENTION
                       : v1::LAYER_KIND_LINEAR_ATTENTION);
      s->set_num_tokens(a.num_tokens);
      s->set_num_nonfinite(a.num_nonfinite);
      SetMeanMax(a.mean_stream_norm(), a.max_stream_norm,
                 s->mutable_stream_norm());
      SetMeanMax(a.mean_update_norm(), a.max_update_norm,
                 s->mutable_update_norm());
      SetMeanMax(a.mean_sum_norm(), a.max_sum_norm, s->mutable_sum_norm());
      SetMeanMax(a.mean_ratio(), a.max_ratio,
                 s->mutable_update_to_stream_ratio());
      s->set_max_abs_activation(a.max_abs);
      s->set_max_abs_dimension(a.max_abs_dim);
    }
  }
  out->set_final_num_tokens(summary.num_final_tokens);
  SetMeanMax(summary.num_final_tokens > 0
                 ? summary.sum_final_stream_norm /
                       static_cast<double>(summary.num_final_tokens)
                 : 0.0,
             summary.max_final_stream_norm, out->mutable_final_stream_norm());
}

}  // namespace tributary

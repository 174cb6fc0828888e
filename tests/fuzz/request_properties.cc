#include "tests/fuzz/request_properties.h"

#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/tokenizer/utf8.h"
#include "server/openai_protocol.h"

namespace tributary {

absl::StatusOr<std::unique_ptr<RequestProperties>> RequestProperties::Create(
    const std::string& model_dir) {
  std::unique_ptr<RequestProperties> p(new RequestProperties);
  p->served_model_ = std::filesystem::path(model_dir).filename().string();
  ASSIGN_OR_RETURN(p->config_, LoadModelConfig(model_dir));
  ASSIGN_OR_RETURN(p->tokenizer_, Tokenizer::Load(model_dir));
  // Bounds like the server's (its flags' defaults are larger; smaller ones
  // let the fuzzer reach them).
  ConversionLimits limits;
  limits.max_prompt_tokens = 4096;
  limits.max_new_tokens = 4096;
  p->converter_ = std::make_unique<RequestConverter>(p->config_, p->tokenizer_.get(), limits);
  return p;
}

std::string RequestProperties::Outcome(const uint8_t* data, size_t size) const {
  if (size == 0) return "empty";
  const char* rest = reinterpret_cast<const char*>(data) + 1;
  if ((data[0] & 2) != 0) {
    // The gRPC API: a serialized GenerateRequest (one that does not parse is
    // refused by gRPC before the service sees it).
    v1::GenerateRequest request;
    if (!request.ParseFromArray(rest, static_cast<int>(size - 1))) return "unparsed";
    return ConversionOutcome(request, std::nullopt);
  }
  const OpenAiEndpoint endpoint = (data[0] & 1) != 0 ? OpenAiEndpoint::kChatCompletions
                                                     : OpenAiEndpoint::kCompletions;
  const std::string body(rest, size - 1);
  OpenAiRequest request;
  std::optional<OpenAiError> error =
      ParseOpenAiRequest(body, endpoint, served_model_, &request);
  if (error.has_value()) {
    if (error->http_status < 400 || error->http_status > 499) {
      return absl::StrCat("property broken: a refusal with HTTP status ",
                          error->http_status);
    }
    if (error->message.empty()) return "property broken: a refusal without a message";
    if (!ValidateUtf8(error->message).ok()) {
      return "property broken: a refusal whose message is not UTF-8";
    }
    (void)error->ToJson().dump();  // strict: throws on ill-formed UTF-8
    return absl::StrCat("refused ", error->http_status, " ", error->param, ": ",
                        error->message);
  }
  return ConversionOutcome(request.generate, endpoint);
}

std::string RequestProperties::ConversionOutcome(
    const v1::GenerateRequest& request, std::optional<OpenAiEndpoint> endpoint) const {
  absl::StatusOr<GenerateRequest> converted = converter_->ToEngine(request);
  if (!converted.ok()) {
    const absl::Status& s = converted.status();
    if (s.code() != absl::StatusCode::kInvalidArgument &&
        s.code() != absl::StatusCode::kResourceExhausted) {
      return absl::StrCat("property broken: a conversion error of kind ",
                          absl::StatusCodeToString(s.code()), ": ", s.message());
    }
    if (s.message().empty()) return "property broken: a conversion error without a message";
    if (!ValidateUtf8(s.message()).ok()) {
      return "property broken: a conversion error whose message is not UTF-8";
    }
    if (!endpoint.has_value()) return absl::StrCat("invalid: ", s.message());
    const OpenAiError mapped = ToOpenAiError(s, *endpoint);
    if (mapped.http_status < 400 || mapped.http_status > 499) {
      return absl::StrCat("property broken: a conversion error mapped to HTTP ",
                          mapped.http_status);
    }
    return absl::StrCat("invalid ", mapped.param, ": ", mapped.message);
  }
  if (converted->prompt_ids.empty() && !converted->prompt_text.has_value()) {
    return "property broken: an accepted request without a prompt";
  }
  return absl::StrCat("accepted ", request.ShortDebugString());
}

std::string RequestProperties::Check(const uint8_t* data, size_t size) const {
  const std::string first = Outcome(data, size);
  if (first.rfind("property broken", 0) == 0) return first;
  const std::string second = Outcome(data, size);
  if (second != first) return absl::StrCat("two outcomes: ", first, " | ", second);
  return "";
}

}  // namespace tributary

#include "engine/model/stop_tokens.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/model/json_field_reader.h"
#include "engine/model/strict_json.h"

namespace tributary {

absl::string_view StopTokenSourceName(StopTokenSource source) {
  switch (source) {
    case StopTokenSource::kNone:
      return "none";
    case StopTokenSource::kGenerationConfig:
      return "generation_config.json";
    case StopTokenSource::kModelConfig:
      return "config.json";
    case StopTokenSource::kTokenizerConfig:
      return "tokenizer_config.json";
  }
  return "none";
}

StopTokens ResolveStopTokens(
    const GenerationConfig* generation_config, const ModelConfig& model_config,
    const std::optional<std::string>& tokenizer_eos_token) {
  StopTokens stop;
  if (generation_config != nullptr &&
      !generation_config->eos_token_ids.empty()) {
    stop.source = StopTokenSource::kGenerationConfig;
    stop.token_ids = generation_config->eos_token_ids;
  } else if (!model_config.eos_token_ids.empty()) {
    stop.source = StopTokenSource::kModelConfig;
    stop.token_ids = model_config.eos_token_ids;
  } else if (tokenizer_eos_token.has_value() && !tokenizer_eos_token->empty()) {
    stop.source = StopTokenSource::kTokenizerConfig;
    stop.eos_token_text = *tokenizer_eos_token;
  }
  return stop;
}

absl::StatusOr<std::optional<std::string>> ParseTokenizerConfigEosToken(
    absl::string_view json_text, absl::string_view source) {
  ASSIGN_OR_RETURN(nlohmann::json root, ParseStrictJsonObject(json_text, source));
  JsonFieldReader reader(root, std::string(source), "");
  if (!reader.Has("eos_token")) return std::optional<std::string>();
  const nlohmann::json& eos = *root.find("eos_token");
  if (eos.is_string()) return std::optional<std::string>(eos.get<std::string>());
  if (eos.is_object()) {
    JsonFieldReader token(eos, std::string(source), "eos_token.");
    ASSIGN_OR_RETURN(std::optional<std::string> content,
                     token.OptionalString("content"));
    if (content.has_value()) return content;
    return token.Error("content", "is missing");
  }
  return reader.Error("eos_token", absl::StrCat("is ", JsonTypeName(eos),
                                                ", expected a string or an "
                                                "object with \"content\""));
}

std::vector<int32_t> ResolveStopTokenIds(
    const StopTokens& stop,
    const std::function<std::optional<int32_t>(absl::string_view)>& token_to_id,
    bool* unresolved_text) {
  std::vector<int32_t> ids(stop.token_ids.begin(), stop.token_ids.end());
  bool unresolved = false;
  if (!stop.eos_token_text.empty()) {
    std::optional<int32_t> id;
    if (token_to_id) id = token_to_id(stop.eos_token_text);
    if (id) {
      ids.push_back(*id);
    } else {
      unresolved = true;
    }
  }
  if (unresolved_text != nullptr) *unresolved_text = unresolved;
  return ids;
}

}  // namespace tributary

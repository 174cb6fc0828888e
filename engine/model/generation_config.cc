#include "engine/model/generation_config.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/model/json_field_reader.h"
#include "engine/model/strict_json.h"

namespace tributary {

absl::StatusOr<GenerationConfig> ParseGenerationConfig(
    absl::string_view json_text, absl::string_view source) {
  ASSIGN_OR_RETURN(nlohmann::json root, ParseStrictJsonObject(json_text, source));
  JsonFieldReader reader(root, std::string(source), "");
  GenerationConfig config;
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> eos,
                   reader.OptionalIntOrIntList("eos_token_id"));
  if (eos.has_value()) config.eos_token_ids = *eos;
  for (int64_t id : config.eos_token_ids) {
    if (id < 0) return reader.Error("eos_token_id", "has a negative id");
  }
  ASSIGN_OR_RETURN(config.bos_token_id, reader.OptionalInt("bos_token_id"));
  ASSIGN_OR_RETURN(config.pad_token_id, reader.OptionalInt("pad_token_id"));
  ASSIGN_OR_RETURN(config.do_sample, reader.OptionalBool("do_sample"));
  ASSIGN_OR_RETURN(config.temperature, reader.OptionalDouble("temperature"));
  ASSIGN_OR_RETURN(config.top_p, reader.OptionalDouble("top_p"));
  ASSIGN_OR_RETURN(config.top_k, reader.OptionalInt("top_k"));
  if (config.temperature.has_value() &&
      !(std::isfinite(*config.temperature) && *config.temperature >= 0)) {
    return reader.Error("temperature", "must be non-negative and finite");
  }
  if (config.top_p.has_value() &&
      !(std::isfinite(*config.top_p) && *config.top_p >= 0)) {
    return reader.Error("top_p", "must be non-negative and finite");
  }
  if (config.top_k.value_or(0) < 0) {
    return reader.Error("top_k", "must be non-negative");
  }
  return config;
}

}  // namespace tributary

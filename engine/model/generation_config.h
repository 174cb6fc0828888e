// generation_config.json: the model's default generation settings.
#ifndef TRIBUTARY_ENGINE_MODEL_GENERATION_CONFIG_H_
#define TRIBUTARY_ENGINE_MODEL_GENERATION_CONFIG_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tributary {

// Only the fields the engine uses; unknown fields are ignored. Absent or null
// fields are empty / nullopt.
struct GenerationConfig {
  std::vector<int64_t> eos_token_ids;  // eos_token_id: an int or a list.
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
};

// Errors (INVALID_ARGUMENT) start with `source` and name the field and value.
// Token ids must be non-negative; temperature and top_p non-negative and
// finite, top_k non-negative.
absl::StatusOr<GenerationConfig> ParseGenerationConfig(
    absl::string_view json_text, absl::string_view source);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_GENERATION_CONFIG_H_

// Which token ids end generation (model-spec §1.2b).
#ifndef TRIBUTARY_ENGINE_MODEL_STOP_TOKENS_H_
#define TRIBUTARY_ENGINE_MODEL_STOP_TOKENS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/generation_config.h"
#include "engine/model/model_config.h"

namespace tributary {

enum class StopTokenSource {
  kNone,              // Nothing found: generation stops only on length.
  kGenerationConfig,  // generation_config.json eos_token_id.
  kModelConfig,       // config.json eos_token_id.
  kTokenizerConfig,   // tokenizer_config.json eos_token (a string).
};

absl::string_view StopTokenSourceName(StopTokenSource source);

struct StopTokens {
  StopTokenSource source = StopTokenSource::kNone;
  // The ids, when source is kGenerationConfig or kModelConfig.
  std::vector<int64_t> token_ids;
  // When source is kTokenizerConfig: the eos token's text (e.g.
  // "<|im_end|>"), which only the tokenizer can map to an id. The caller
  // resolves it and stops on that id.
  std::string eos_token_text;
};

// First match wins: generation_config.json eos_token_id (when the file exists
// and the field is a non-empty int or list), then config.json's, then
// tokenizer_config.json's eos_token. `generation_config` may be null (no
// file); `tokenizer_eos_token` is nullopt when absent.
StopTokens ResolveStopTokens(const GenerationConfig* generation_config,
                             const ModelConfig& model_config,
                             const std::optional<std::string>& tokenizer_eos_token);

// Reads "eos_token" from tokenizer_config.json text: a string, or an added-
// token object {"content": "...", ...}. nullopt when absent or null.
absl::StatusOr<std::optional<std::string>> ParseTokenizerConfigEosToken(
    absl::string_view json_text, absl::string_view source);

// The ids that end generation: `stop.token_ids`, plus the id of
// `stop.eos_token_text` when there is one and `token_to_id` knows it (the
// tokenizer's lookup; pass nullptr when there is no tokenizer). Sets
// *unresolved_text when a text could not be resolved, for the caller to warn.
std::vector<int32_t> ResolveStopTokenIds(
    const StopTokens& stop,
    const std::function<std::optional<int32_t>(absl::string_view)>& token_to_id,
    bool* unresolved_text = nullptr);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_STOP_TOKENS_H_

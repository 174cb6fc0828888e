// Conversion between the API's messages (tributary.v1) and the engine's
// types, with the validation of every field that the engine does not know by
// its proto name (design.md §6: every error names the field):
//   v1.GenerateRequest -> GenerateRequest (the prompt encoded: text, ids or a
//   chat through the model's template), TokenEvent -> v1.GenerateResponse,
//   ResidualSummary -> v1.ResidualStats.
// Immutable after construction; thread-safe.
#ifndef TRIBUTARY_SERVER_REQUEST_CONVERTER_H_
#define TRIBUTARY_SERVER_REQUEST_CONVERTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/vector_library.h"
#include "engine/runtime/request.h"
#include "engine/telemetry/residual_summary.h"
#include "engine/tokenizer/tokenizer.h"
#include "tributary/v1/tributary.pb.h"

namespace tributary {

struct ConversionLimits {
  int64_t max_prompt_tokens = 0;  // > 0
  int32_t max_new_tokens = 0;     // > 0
  static constexpr int kMaxChatMessages = 256;
  static constexpr int kMaxPriority = 1000;
};

// An engine error (INVALID_ARGUMENT naming the engine's field, from
// validation or Submit) with the field named by its proto path:
// "max_new_tokens = …" is stopping.max_new_tokens, "steering[0].vector[3]"
// steering[0].direction.inline_vector.values[3], "ablate[1][0]"
// ablate[1].inline_vector.values[0]. Other statuses pass unchanged.
absl::Status WithProtoFieldName(const absl::Status& status);

class RequestConverter {
 public:
  // `tokenizer` may be null (token-id prompts only); `vectors` may be null
  // (no named directions); neither is owned.
  RequestConverter(const ModelConfig& config, const Tokenizer* tokenizer,
                   ConversionLimits limits,
                   const VectorLibrary* vectors = nullptr);

  // INVALID_ARGUMENT naming the field (e.g. "sampling.top_p = 1.5 must be in
  // (0, 1]", "input: one of text, token_ids or chat is required").
  absl::StatusOr<GenerateRequest> ToEngine(
      const v1::GenerateRequest& request) const;

  // The prompt ids of a text or chat input (Tokenize, and ToEngine).
  absl::StatusOr<std::vector<int32_t>> EncodeText(const std::string& text) const;
  absl::StatusOr<std::vector<int32_t>> EncodeChat(
      const v1::ChatInput& chat) const;

  // Appends what `event` carries (text, ids, logprobs, trace) to `out`;
  // on the final event also the finish reason, usage, timing and summary.
  void AppendEvent(const TokenEvent& event, const v1::ResponseOptions& options,
                   v1::GenerateResponse* out) const;

  // A summary in the API's shape (layers' kinds from the model config).
  void ToProto(const ResidualSummary& summary, double window_seconds,
               v1::ResidualStats* out) const;

  const Tokenizer* tokenizer() const { return tokenizer_; }

 private:
  absl::StatusOr<std::vector<int32_t>> CheckPromptLength(
      std::vector<int32_t> ids, const char* field) const;
  absl::StatusOr<std::vector<float>> ResolveDirection(
      const v1::Direction& direction, const std::string& field) const;
  absl::Status ConvertInterventions(const v1::GenerateRequest& request,
                                    GenerateRequest* out) const;

  const ModelConfig& config_;
  const Tokenizer* tokenizer_;
  ConversionLimits limits_;
  const VectorLibrary* vectors_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_REQUEST_CONVERTER_H_

// A request's interventions on the residual stream, validated and
// normalised once at Submit (RequestInterventions::Create), then mapped to
// the rows of every step the request is in (AddToStep). The decoder applies
// them (decoder/stream_interventions.h); requests with different
// interventions share steps with each other and with plain requests.
#ifndef TRIBUTARY_ENGINE_RUNTIME_REQUEST_INTERVENTIONS_H_
#define TRIBUTARY_ENGINE_RUNTIME_REQUEST_INTERVENTIONS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/decoder/stream_interventions.h"
#include "engine/runtime/request.h"

namespace tributary {

class RequestInterventions {
 public:
  // INVALID_ARGUMENT naming the field: vector lengths equal to the hidden
  // size, finite values, layers in range and distinct, the limits of
  // GenerateRequest. Moves the vectors out of `request`.
  static absl::StatusOr<RequestInterventions> Create(GenerateRequest& request,
                                                     const ModelConfig& config);

  bool empty() const {
    return steering_.empty() && ablate_units_.empty() && skip_layers_.empty() &&
           !lens_.has_value();
  }
  // Whether the request changes the residual stream (steering, ablation or
  // layer skipping; the logit lens only reads it): such a request's tokens
  // stay out of the model-health statistics the observer gets.
  bool changes_stream() const {
    return !steering_.empty() || !ablate_units_.empty() || !skip_layers_.empty();
  }
  const std::optional<LogitLensOptions>& lens() const { return lens_; }

  // Which StepInterventions::lens reads belong to this request.
  struct LensRead {
    int64_t position = 0;
    int32_t layer = 0;
  };
  // Appends this request's interventions for one scheduled chunk: rows
  // [row_begin, row_begin + num_tokens) at positions first_position…,
  // whose prompt has prompt_len tokens. `samples` = the chunk's last row
  // predicts the next generated token. Lens reads start at position
  // *next_lens_position (a recompute after a preemption reads nothing
  // twice), which is advanced; each read is also appended to `reads`.
  void AddToStep(int64_t row_begin, int64_t num_tokens, int64_t first_position,
                 int64_t prompt_len, bool samples, int64_t* next_lens_position,
                 StepInterventions* step, std::vector<LensRead>* reads) const;

 private:
  std::vector<SteeringVector> steering_;
  std::vector<std::vector<float>> ablate_units_;
  std::vector<int32_t> skip_layers_;
  std::optional<LogitLensOptions> lens_;
  int32_t num_layers_ = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_RUNTIME_REQUEST_INTERVENTIONS_H_

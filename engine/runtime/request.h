// What a client hands the engine (GenerateRequest) and what it gets back, one
// event at a time, through its TokenSink (design.md §2, §6).
#ifndef TRIBUTARY_ENGINE_RUNTIME_REQUEST_H_
#define TRIBUTARY_ENGINE_RUNTIME_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/sampling/finish_reason.h"
#include "engine/sampling/logprobs.h"
#include "engine/sampling/sampling_params.h"
#include "engine/telemetry/residual_summary.h"

namespace tributary {

// A steering vector added to the residual stream (design: every sublayer
// only adds to the stream, so adding a direction is the cheapest
// intervention).
struct SteeringVector {
  int32_t layer = 0;
  // The point: right after the layer's ffn add (true) or its mixer add.
  bool after_ffn = true;
  std::vector<float> vector;  // [hidden_size], finite
  float scale = 1.0f;         // finite
  // Only the generated tokens' positions; else the prompt's too.
  bool generated_only = false;
};

// The logit lens: the top tokens that the stream after a layer would
// predict if that layer were the last (final norm, then lm_head).
struct LogitLensOptions {
  std::vector<int32_t> layers;  // distinct, in range; empty = every layer
  int32_t top_n = 5;            // in [1, kMaxLensTopN]
  // Every prompt position too, not only the positions that predict a
  // generated token.
  bool include_prompt = false;
};

struct GenerateRequest {
  // The prompt: token ids, or text when the engine has a tokenizer (exactly
  // one of the two must be set; the text is encoded by Submit, without any
  // chat template).
  std::vector<int32_t> prompt_ids;
  std::optional<std::string> prompt_text;
  // Sampling and stopping. sampling.max_new_tokens unset = the room left in
  // the context, capped by EngineOptions::max_new_tokens_limit.
  SamplingParams sampling;
  // Higher is admitted first; never preempts a running request.
  int priority = 0;
  // Leave special tokens out of the text deltas.
  bool skip_special_tokens = true;
  // Residual-stream statistics of this request's tokens (design.md §4),
  // when the engine computes them (EngineOptions::residual_stats): a
  // per-(layer, sublayer) summary on the final event, and/or the per-token
  // norms on every event.
  bool residual_summary = false;
  bool residual_trace = false;

  // Interventions on the residual stream (decoder/stream_interventions.h),
  // validated by Submit (INVALID_ARGUMENT naming the field):
  static constexpr int kMaxSteeringVectors = 16;
  // Bound on every element of a steering vector times its scale: far above
  // any residual stream a model of this family carries (its largest
  // activations are in the thousands), and far enough below float32's
  // overflow that the steered stream, its squares in the norms and the
  // products after it stay finite, so a request cannot fill the stream with
  // Inf or NaN.
  static constexpr float kMaxSteeringMagnitude = 1e6f;
  static constexpr int kMaxAblations = 4;
  static constexpr int32_t kMaxLensTopN = 20;
  std::vector<SteeringVector> steering;
  // Directions projected out of the stream after the embedding and after
  // every sublayer, at every position ([hidden_size] each, finite, not
  // zero; normalised by the engine).
  std::vector<std::vector<float>> ablate;
  // Layers whose mixer and ffn updates are not added (distinct, in range).
  std::vector<int32_t> skip_layers;
  std::optional<LogitLensOptions> logit_lens;
};

// One logit-lens reading: the stream at `position` after `layer`.
struct LensReading {
  int64_t position = 0;
  int32_t layer = 0;
  std::vector<TokenLogprob> top;  // most likely first
};

// One token position's residual norms: for sublayer index 2 * layer +
// sublayer (0 = mixer, 1 = ffn), norms[3 * index + k] is ‖x‖ (k = 0), ‖u‖
// (k = 1) and ‖x + u‖ (k = 2).
struct ResidualTraceToken {
  int64_t position = 0;
  std::vector<float> norms;  // [2 * num_layers * 3]
};

struct TokenUsage {
  int64_t num_prompt_tokens = 0;
  int64_t num_generated_tokens = 0;
};

struct RequestTiming {
  // Submit -> first scheduled in a step.
  double queue_seconds = 0.0;
  // Submit -> first token (0 when no token was generated).
  double time_to_first_token_seconds = 0.0;
  // Submit -> final event.
  double total_seconds = 0.0;
};

// One event for a request. Every accepted request gets zero or more token
// events and then exactly one final event (is_final), after which nothing.
struct TokenEvent {
  uint64_t request_id = 0;
  // A generated token (also set on a final event that carries one, e.g. the
  // last token on length, or the EOS / stop token that ended generation).
  bool has_token = false;
  int32_t token_id = -1;
  // Text released by this event: always complete UTF-8, possibly empty
  // (held back while it may be part of a stop string or of a character;
  // empty without a tokenizer).
  std::string text;
  // When sampling.num_logprobs is set: the token's raw logprob and the top
  // num_logprobs of the raw distribution.
  std::optional<float> logprob;
  std::vector<TokenLogprob> top_logprobs;
  // When residual_trace was asked: the tokens the model processed since the
  // previous event (the prompt's come with the first event), each position
  // once even when a preemption recomputes it.
  std::vector<ResidualTraceToken> residual_trace;
  // With logit_lens: the readings of the positions processed since the
  // previous event (each position once), in position then layer order.
  std::vector<LensReading> logit_lens;

  // --- On the final event only ---
  bool is_final = false;
  // OK, or the error that ended the request (INTERNAL for a failed step or a
  // non-finite logit; UNAVAILABLE when the engine failed, or when a
  // shutdown's deadline passed before the request finished).
  absl::Status status;
  // Set when status is OK.
  std::optional<FinishReason> finish_reason;
  // kStop / kStopToken: the token id; kStopString: the string.
  std::optional<int32_t> matched_token_id;
  std::optional<std::string> matched_stop_string;
  TokenUsage usage;
  RequestTiming timing;
  // When residual_summary was asked: over every position the model
  // processed for this request (prompt and generated tokens).
  std::optional<ResidualSummary> residual_summary;
};

// Receives a request's events. Called on the engine thread, one call at a
// time per sink, in order. Contract: OnEvent must not block and should be
// cheap (copy or move the event into a buffer; the gRPC layer buffers): every
// other request waits while it runs. It must not call Engine::Shutdown (it
// may call Submit and Cancel). The engine keeps the sink alive until the
// final event has been delivered.
class TokenSink {
 public:
  virtual ~TokenSink() = default;
  virtual void OnEvent(const TokenEvent& event) = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_RUNTIME_REQUEST_H_

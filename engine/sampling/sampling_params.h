// The per-request sampling and stopping settings, validated once when the
// request arrives (design.md §6: every error names the field and the value).
//
// Defaults are the neutral ones of vLLM and the OpenAI API: sample from the
// model's own distribution (temperature 1, no truncation, no penalties). The
// server may overlay the model's generation_config.json defaults on fields the
// request leaves unset; this struct does not know about the model.
#ifndef TRIBUTARY_ENGINE_SAMPLING_SAMPLING_PARAMS_H_
#define TRIBUTARY_ENGINE_SAMPLING_SAMPLING_PARAMS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace tributary {

struct SamplingParams {
  // Limits checked by Validate().
  static constexpr float kMaxTemperature = 100.0f;
  // Below this a temperature is greedy (vLLM's _SAMPLING_EPS): dividing by a
  // tiny temperature only overflows, and the result is the argmax anyway.
  static constexpr float kGreedyTemperature = 1e-5f;
  static constexpr float kMaxRepetitionPenalty = 100.0f;
  static constexpr float kMaxAbsPresenceFrequencyPenalty = 2.0f;
  static constexpr int32_t kMaxNumLogprobs = 20;
  static constexpr int kMaxNumStopStrings = 16;
  static constexpr int kMaxStopStringBytes = 256;
  static constexpr int kMaxNumStopTokenIds = 64;

  // --- Sampling (applied in this order, see sampler.h) ---

  // 0 (or < kGreedyTemperature) = greedy; in [0, kMaxTemperature].
  float temperature = 1.0f;
  // Keep the k most likely tokens; 0 = off; >= 0.
  int32_t top_k = 0;
  // Keep the smallest set of most likely tokens whose probability reaches
  // top_p; in (0, 1]; 1 = off.
  float top_p = 1.0f;
  // Drop tokens whose probability is below min_p times the most likely
  // token's; in [0, 1]; 0 = off.
  float min_p = 0.0f;
  // CTRL / HF rule for every token seen in the prompt or the output: a
  // positive logit is divided by it, a negative one multiplied. In
  // (0, kMaxRepetitionPenalty]; 1 = off.
  float repetition_penalty = 1.0f;
  // OpenAI semantics over the generated tokens only: logit -= presence (once
  // per distinct token) + frequency * count. Each in [-2, 2]; 0 = off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // The request's seed; when absent the engine draws one per request (see
  // EffectiveSeed in sampler.h).
  std::optional<uint64_t> seed;
  // Logprobs of the raw distribution: nullopt = none; 0 = only the chosen
  // token's; n in 1..kMaxNumLogprobs = also the n most likely tokens'.
  std::optional<int32_t> num_logprobs;

  // --- Stopping (see stop_matcher.h) ---

  // nullopt = as many as the context allows (the engine caps it); else >= 1.
  std::optional<int32_t> max_new_tokens;
  // Keep generating past the model's EOS ids (stop token ids still stop).
  bool ignore_eos = false;
  // At most kMaxNumStopTokenIds ids, each >= 0 (< vocab: ValidateTokenIds).
  std::vector<int32_t> stop_token_ids;
  // At most kMaxNumStopStrings strings, each non-empty, valid UTF-8 and at
  // most kMaxStopStringBytes bytes. Matched across token boundaries.
  std::vector<std::string> stop_strings;
  // Whether the text emitted at a stop-string match ends with the stop string.
  bool include_stop_string_in_output = false;

  // InvalidArgument naming the first bad field and its value.
  absl::Status Validate() const;
  // InvalidArgument when a stop token id is outside [0, vocab_size): only the
  // engine knows the vocabulary.
  absl::Status ValidateTokenIds(int32_t vocab_size) const;

  bool is_greedy() const { return temperature < kGreedyTemperature; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f ||
           frequency_penalty != 0.0f;
  }
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SAMPLING_SAMPLING_PARAMS_H_

// The sampling settings of one logits row for Backend::ChooseTokens
// (backend.h), shared by the backends and the decoder.
#ifndef TRIBUTARY_ENGINE_BACKEND_TOKEN_CHOICE_H_
#define TRIBUTARY_ENGINE_BACKEND_TOKEN_CHOICE_H_

#include <cstdint>

// The kernels (sampling_kernels.cu) call the structs' helpers too.
#include "engine/backend/host_device.h"

namespace tributary {

// One logits row's sampling settings for Backend::ChooseTokens, uploaded
// as they are (a [rows, kTokenChoiceWords] i32 tensor of the structs'
// bytes). The rule is the host sampler's without penalties
// (engine/sampling/candidate_list.h, its canonical order):
//  - temperature < kGreedyTemperature: the argmax (the lowest id of the
//    largest logit), the rest ignored;
//  - otherwise each token weighs w = f32(exp(f64(f32((f64(logit) − max) ·
//    (1 / f64(temperature)))))): the exponent rounded to f32, its exp in f64
//    rounded to f32 (devices agree with the host on it but in ~2⁻²⁹ of
//    cases; an f32 expf would not), and tokens rank by logit, ties to the
//    lower id. top_k > 0 keeps the top_k highest-ranked. top_p < 1 then keeps the
//    smallest rank prefix whose weight (accumulated in rank order) reaches
//    top_p · (1 − 1e-9) of the kept tokens' total (summed in id order).
//    min_p > 0 then keeps the tokens with (f64(logit) − max) /
//    temperature ≥ log(min_p). The token is where uniform · (the survivors'
//    total) falls, accumulating the survivors in id order. Sums in f64.
// A device's sums run in another order, so its token may differ from the
// host's only where a cut falls within f64 rounding (~1e-16) of a boundary
// (or where a weight rounds the other way, above).
// With num_logprobs ≥ 0 the row's raw logprobs come back too (TokenLogprobs).
// Penalties (engine/sampling/logits_penalizer.h) apply first, to the tokens
// of the row's history entries (TokenHistoryEntry): each distinct id of the
// prompt and the output once, repetition (logit > 0 ? logit / r : logit ·
// r) and then, for ids the output holds, logit − presence − frequency ·
// count, in f64 and clamped to the finite f32 range; the logprobs stay of
// the raw row.
struct TokenChoice {
  static constexpr float kGreedyTemperature = 1e-5f;  // SamplingParams'
  float temperature = 0.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  double uniform = 0.0;  // in [0, 1)
  // -1: no logprobs; 0: the chosen token's; n in 1 … kMaxTopLogprobs: also
  // the n most likely tokens' (TokenLogprobs).
  int32_t num_logprobs = -1;
  // Penalties (1, 0, 0: off) over the history entries [history_begin,
  // history_begin + history_count) of the call's history.
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t history_begin = 0;
  int32_t history_count = 0;
  int32_t reserved = 0;  // uploaded as is: keep 0

  TRIBUTARY_HOST_DEVICE bool has_penalties() const {
    return history_count > 0 && (repetition_penalty != 1.0f ||
                                 presence_penalty != 0.0f ||
                                 frequency_penalty != 0.0f);
  }
  // The logit of a history entry's token after this row's penalties (the
  // rule above), for a token the output holds output_count times (0: the
  // prompt only). One definition for the CPU reference and the kernel.
  TRIBUTARY_HOST_DEVICE float PenalizedLogit(float logit,
                                             int32_t output_count) const {
    if (repetition_penalty != 1.0f) {
      const double penalty = repetition_penalty;
      const double value = logit;
      logit = ClampToFloatRange(value > 0 ? value / penalty : value * penalty);
    }
    if ((presence_penalty != 0.0f || frequency_penalty != 0.0f) &&
        output_count > 0) {
      logit = ClampToFloatRange(static_cast<double>(logit) - presence_penalty -
                                static_cast<double>(frequency_penalty) *
                                    output_count);
    }
    return logit;
  }
  // v rounded to f32 within the finite range (NaN stays NaN), as the host
  // penalizer's std::clamp.
  TRIBUTARY_HOST_DEVICE static float ClampToFloatRange(double v) {
    constexpr double kMax = 3.4028234663852886e38;  // FLT_MAX
    return static_cast<float>(v < -kMax ? -kMax : v > kMax ? kMax : v);
  }
};
constexpr int64_t kTokenChoiceWords = sizeof(TokenChoice) / sizeof(int32_t);
static_assert(sizeof(TokenChoice) == 56, "uploaded as 14 words");

// One distinct token of a row's prompt and output, for its penalties.
struct TokenHistoryEntry {
  int32_t token_id = 0;
  int32_t output_count = 0;  // occurrences in the output (0: prompt only)
  float raw_logit = 0.0f;    // scratch: the backend keeps the unpenalized logit
};
constexpr int64_t kTokenHistoryWords = sizeof(TokenHistoryEntry) / sizeof(int32_t);
static_assert(sizeof(TokenHistoryEntry) == 12, "uploaded as 3 words");

// The most top logprobs a row can ask (SamplingParams::kMaxNumLogprobs).
constexpr int32_t kMaxTopLogprobs = 20;

// A row's raw logprobs from ChooseTokens (TokenChoice::num_logprobs ≥ 0),
// the host sampler's (engine/sampling/logprobs.h): log_softmax of the raw
// logits, lse = max + log(Σ expf(logit − max)) with the sum in f64; the
// chosen token's, and the `count` most likely tokens', most likely first,
// ties to the lower id. Downloaded as is.
struct TokenLogprobs {
  float chosen = 0.0f;
  int32_t count = 0;
  int32_t top_ids[kMaxTopLogprobs] = {};
  float top_logprobs[kMaxTopLogprobs] = {};
};
constexpr int64_t kTokenLogprobsWords = sizeof(TokenLogprobs) / sizeof(int32_t);
static_assert(sizeof(TokenLogprobs) == 168, "downloaded as 42 words");

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_TOKEN_CHOICE_H_

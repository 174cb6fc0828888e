#include "engine/sampling/sampling_params.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/tokenizer/utf8.h"

namespace tributary {
namespace {

// "name = value must be in [lo, hi]" when value is outside it (or NaN).
absl::Status CheckClosedRange(absl::string_view name, float value, float lo,
                              float hi) {
  if (std::isfinite(value) && value >= lo && value <= hi) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(name, " = ", value, " must be in [", lo, ", ", hi, "]"));
}

// Quoted, shortened for the message (a stop string may be 256 bytes).
std::string Shorten(absl::string_view text) {
  constexpr size_t kMaxShown = 32;
  if (text.size() <= kMaxShown) return absl::StrCat("\"", text, "\"");
  return absl::StrCat("\"", text.substr(0, kMaxShown), "...\"");
}

}  // namespace

absl::Status SamplingParams::Validate() const {
  if (auto s =
          CheckClosedRange("temperature", temperature, 0.0f, kMaxTemperature);
      !s.ok()) {
    return s;
  }
  if (top_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_k = ", top_k, " must be >= 0 (0 = off)"));
  }
  if (!(std::isfinite(top_p) && top_p > 0.0f && top_p <= 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_p = ", top_p, " must be in (0, 1] (1 = off)"));
  }
  if (auto s = CheckClosedRange("min_p", min_p, 0.0f, 1.0f); !s.ok()) {
    return s;
  }
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f &&
        repetition_penalty <= kMaxRepetitionPenalty)) {
    return absl::InvalidArgumentError(
        absl::StrCat("repetition_penalty = ", repetition_penalty,
                     " must be in (0, ", kMaxRepetitionPenalty, "] (1 = off)"));
  }
  if (auto s = CheckClosedRange("presence_penalty", presence_penalty,
                                -kMaxAbsPresenceFrequencyPenalty,
                                kMaxAbsPresenceFrequencyPenalty);
      !s.ok()) {
    return s;
  }
  if (auto s = CheckClosedRange("frequency_penalty", frequency_penalty,
                                -kMaxAbsPresenceFrequencyPenalty,
                                kMaxAbsPresenceFrequencyPenalty);
      !s.ok()) {
    return s;
  }
  if (num_logprobs.has_value() &&
      (*num_logprobs < 0 || *num_logprobs > kMaxNumLogprobs)) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_logprobs = ", *num_logprobs, " must be in [0, ",
                     kMaxNumLogprobs, "]"));
  }
  if (max_new_tokens.has_value() && *max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_new_tokens = ", *max_new_tokens, " must be >= 1"));
  }
  if (stop_token_ids.size() > static_cast<size_t>(kMaxNumStopTokenIds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stop_token_ids has ", stop_token_ids.size(),
                     " ids; at most ", kMaxNumStopTokenIds, " are allowed"));
  }
  for (size_t i = 0; i < stop_token_ids.size(); ++i) {
    if (stop_token_ids[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stop_token_ids[", i, "] = ", stop_token_ids[i], " must be >= 0"));
    }
  }
  if (stop_strings.size() > static_cast<size_t>(kMaxNumStopStrings)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stop_strings has ", stop_strings.size(),
                     " strings; at most ", kMaxNumStopStrings, " are allowed"));
  }
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    const std::string& stop = stop_strings[i];
    if (stop.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop_strings[", i, "] is empty"));
    }
    if (stop.size() > static_cast<size_t>(kMaxStopStringBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stop_strings[", i, "] = ", Shorten(stop), " has ", stop.size(),
          " bytes; at most ", kMaxStopStringBytes, " are allowed"));
    }
    if (absl::Status s = ValidateUtf8(stop); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stop_strings[", i, "] is not valid UTF-8: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status SamplingParams::ValidateTokenIds(int32_t vocab_size) const {
  for (size_t i = 0; i < stop_token_ids.size(); ++i) {
    if (stop_token_ids[i] < 0 || stop_token_ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("stop_token_ids[", i, "] = ", stop_token_ids[i],
                       " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tributary

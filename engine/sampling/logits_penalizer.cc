#include "engine/sampling/logits_penalizer.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tributary {
namespace {

absl::Status CheckIds(absl::string_view name, absl::Span<const int32_t> ids,
                      size_t vocab_size) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "[", i, "] = ", ids[i],
                       " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

float ClampFinite(double value) {
  constexpr double kMax = std::numeric_limits<float>::max();
  return static_cast<float>(std::clamp(value, -kMax, kMax));
}

}  // namespace

absl::Status LogitsPenalizer::Apply(const SamplingParams& params,
                                    const TokenHistory& history,
                                    absl::Span<float> logits) {
  if (!params.has_penalties()) return absl::OkStatus();
  const size_t vocab_size = logits.size();
  // Check every id first so that an error leaves the logits untouched.
  if (auto s = CheckIds("prompt_ids", history.prompt_ids, vocab_size);
      !s.ok()) {
    return s;
  }
  if (auto s = CheckIds("output_ids", history.output_ids, vocab_size);
      !s.ok()) {
    return s;
  }
  if (scratch_.size() < vocab_size) scratch_.resize(vocab_size, 0);

  if (params.repetition_penalty != 1.0f) {
    const double penalty = params.repetition_penalty;
    // Mark on first sight so that a repeated token is penalized once.
    auto penalize = [&](absl::Span<const int32_t> ids) {
      for (int32_t id : ids) {
        if (scratch_[id] != 0) continue;
        scratch_[id] = 1;
        const double logit = logits[id];
        logits[id] = ClampFinite(logit > 0 ? logit / penalty : logit * penalty);
      }
    };
    penalize(history.prompt_ids);
    penalize(history.output_ids);
    for (int32_t id : history.prompt_ids) scratch_[id] = 0;
    for (int32_t id : history.output_ids) scratch_[id] = 0;
  }

  if (params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {
    for (int32_t id : history.output_ids) ++scratch_[id];
    // The first visit of each distinct id applies its count and clears it.
    for (int32_t id : history.output_ids) {
      const int32_t count = scratch_[id];
      if (count == 0) continue;
      scratch_[id] = 0;
      logits[id] = ClampFinite(
          static_cast<double>(logits[id]) - params.presence_penalty -
          static_cast<double>(params.frequency_penalty) * count);
    }
  }
  return absl::OkStatus();
}

}  // namespace tributary

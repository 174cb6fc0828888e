#include "engine/sampling/stop_matcher.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tributary {
namespace {

std::vector<int32_t> KmpFailure(absl::string_view text) {
  std::vector<int32_t> failure(text.size(), 0);
  int32_t k = 0;
  for (size_t i = 1; i < text.size(); ++i) {
    while (k > 0 && text[i] != text[k]) k = failure[k - 1];
    if (text[i] == text[k]) ++k;
    failure[i] = k;
  }
  return failure;
}

}  // namespace

absl::StatusOr<StopMatcher> StopMatcher::Create(
    const SamplingParams& params, absl::Span<const int32_t> eos_token_ids,
    int32_t max_new_tokens) {
  RETURN_IF_ERROR(params.Validate());
  if (max_new_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_new_tokens = ", max_new_tokens, " must be >= 1"));
  }
  StopMatcher matcher;
  if (!params.ignore_eos) {
    matcher.eos_token_ids_.assign(eos_token_ids.begin(), eos_token_ids.end());
  }
  matcher.stop_token_ids_ = params.stop_token_ids;
  for (const std::string& text : params.stop_strings) {
    matcher.stop_strings_.push_back({text, KmpFailure(text), 0});
  }
  matcher.include_stop_string_ = params.include_stop_string_in_output;
  matcher.max_new_tokens_ = max_new_tokens;
  return matcher;
}

StopDecision StopMatcher::Finish(FinishReason reason, std::string text) {
  finished_ = true;
  held_.clear();
  StopDecision decision;
  decision.text = std::move(text);
  decision.finish = reason;
  return decision;
}

absl::StatusOr<StopDecision> StopMatcher::Add(int32_t token_id,
                                              absl::string_view text_delta) {
  if (finished_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "StopMatcher::Add(token ", token_id, ") after the sequence finished"));
  }
  ++num_generated_tokens_;

  auto contains = [](const std::vector<int32_t>& ids, int32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  if (contains(eos_token_ids_, token_id)) {
    StopDecision decision = Finish(FinishReason::kStop, std::move(held_));
    decision.matched_token_id = token_id;
    return decision;
  }
  if (contains(stop_token_ids_, token_id)) {
    StopDecision decision = Finish(FinishReason::kStopToken, std::move(held_));
    decision.matched_token_id = token_id;
    return decision;
  }

  // Feed the new bytes to every automaton; held_ is already accounted for in
  // their states. The first byte that completes a stop string ends it.
  const size_t old_size = held_.size();
  held_.append(text_delta.data(), text_delta.size());
  for (size_t pos = old_size; pos < held_.size(); ++pos) {
    const char byte = held_[pos];
    int32_t matched = -1;
    for (size_t j = 0; j < stop_strings_.size(); ++j) {
      StopString& stop = stop_strings_[j];
      int32_t state = stop.state;
      while (state > 0 && stop.text[state] != byte) {
        state = stop.failure[state - 1];
      }
      if (stop.text[state] == byte) ++state;
      stop.state = state;
      if (static_cast<size_t>(state) == stop.text.size() &&
          (matched < 0 ||
           stop.text.size() > stop_strings_[matched].text.size())) {
        matched = static_cast<int32_t>(j);
      }
    }
    if (matched >= 0) {
      const size_t end = pos + 1;
      const size_t cut =
          include_stop_string_ ? end : end - stop_strings_[matched].text.size();
      StopDecision decision =
          Finish(FinishReason::kStopString, held_.substr(0, cut));
      decision.matched_stop_string = matched;
      return decision;
    }
  }

  if (num_generated_tokens_ >= max_new_tokens_) {
    return Finish(FinishReason::kLength, std::move(held_));
  }

  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const StopString& stop : stop_strings_) {
    hold = std::max(hold, static_cast<size_t>(stop.state));
  }
  StopDecision decision;
  decision.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return decision;
}

std::string StopMatcher::Flush() {
  if (finished_) return "";
  finished_ = true;
  return std::exchange(held_, std::string());
}

}  // namespace tributary

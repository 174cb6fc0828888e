// Decides when one sequence stops and which of its text may be streamed.
//
// The engine feeds every generated token with its text delta (complete UTF-8,
// from StreamDecoder). Checks, in this order (vLLM's): the model's EOS ids
// (unless ignore_eos), the request's stop token ids, its stop strings, then
// the length budget. A stop string may span any number of tokens, so text
// that could be the beginning of a stop string is held back until it either
// completes one (then it is cut) or cannot anymore (then it is released):
// the caller never streams text that later turns out to belong to a stop
// string. Held-back text is always a whole number of UTF-8 characters (a
// valid stop string cannot start on a continuation byte).
//
// Stop strings are found with one Knuth-Morris-Pratt automaton each, fed byte
// by byte: O(bytes * stop strings) per token, and overlapping prefixes
// ("abc" in "ababc") are handled exactly. When several stop strings match,
// the one that ends first wins (what generating character by character would
// have done), then the longest; the text before it is emitted, and the stop
// string too with include_stop_string_in_output. Text after the match in the
// same delta is dropped.
//
// On EOS or a stop token the token's own text is not emitted (the caller has
// its id) and held-back text is released: nothing can complete it anymore.
// The same on length.
//
// Not thread-safe; one per sequence. Copyable and movable.
#ifndef TRIBUTARY_ENGINE_SAMPLING_STOP_MATCHER_H_
#define TRIBUTARY_ENGINE_SAMPLING_STOP_MATCHER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "engine/sampling/finish_reason.h"
#include "engine/sampling/sampling_params.h"

namespace tributary {

struct StopDecision {
  // Text to stream now (possibly empty); complete UTF-8.
  std::string text;
  // Set when the sequence is finished.
  std::optional<FinishReason> finish;
  // kStop / kStopToken: the token that stopped it.
  std::optional<int32_t> matched_token_id;
  // kStopString: its index in params.stop_strings (the string is there).
  std::optional<int32_t> matched_stop_string;
};

class StopMatcher {
 public:
  // `params` is validated here (its errors name the field). `eos_token_ids`:
  // the model's, from its generation config. `max_new_tokens`: the resolved
  // budget, i.e. params.max_new_tokens capped by the room left in the context
  // (only the engine knows the context); >= 1.
  static absl::StatusOr<StopMatcher> Create(
      const SamplingParams& params, absl::Span<const int32_t> eos_token_ids,
      int32_t max_new_tokens);

  // One generated token and the text it completed. FailedPrecondition after
  // the sequence finished.
  absl::StatusOr<StopDecision> Add(int32_t token_id,
                                   absl::string_view text_delta);

  // Releases the held-back text and finishes the matcher, for a sequence that
  // ends for a reason the matcher does not see (cancellation); whether to
  // stream it is the engine's call. "" when already finished.
  std::string Flush();

  bool finished() const { return finished_; }
  int32_t num_generated_tokens() const { return num_generated_tokens_; }
  // Bytes of text held back (a possible stop-string prefix).
  size_t num_held_bytes() const { return held_.size(); }

 private:
  struct StopString {
    std::string text;
    // failure[i]: the length of the longest proper prefix of text[0, i]
    // that is also its suffix (KMP).
    std::vector<int32_t> failure;
    int32_t state = 0;  // bytes of `text` matched as a suffix of the output
  };

  StopMatcher() = default;
  StopDecision Finish(FinishReason reason, std::string text);

  std::vector<int32_t> eos_token_ids_;  // empty with ignore_eos
  std::vector<int32_t> stop_token_ids_;
  std::vector<StopString> stop_strings_;
  bool include_stop_string_ = false;
  int32_t max_new_tokens_ = 0;
  int32_t num_generated_tokens_ = 0;
  bool finished_ = false;
  std::string held_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SAMPLING_STOP_MATCHER_H_

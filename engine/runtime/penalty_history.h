// A request's penalty history for device sampling (Backend::ChooseTokens):
// the distinct ids its penalties touch, each with its count in the output,
// kept up to date token by token.
//
// The ids are the output's, plus the prompt's (count 0 unless also in the
// output) when the repetition penalty is on: presence and frequency see the
// output only (logits_penalizer.h). Built once, from the prompt, when the
// request first samples on the device; then each generated token costs O(1)
// (a hash lookup) instead of recounting prompt + output every step.
// A step copies entries() into its upload: O(distinct ids), a plain copy.
//
// Entry order: first appearance (prompt ids in prompt order, then new output
// ids as they come). The backend applies each entry once, so the order does
// not change the result.
#ifndef TRIBUTARY_ENGINE_RUNTIME_PENALTY_HISTORY_H_
#define TRIBUTARY_ENGINE_RUNTIME_PENALTY_HISTORY_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "engine/backend/token_choice.h"

namespace tributary {

class PenaltyHistory {
 public:
  // From the prompt (its ids only when with_prompt) and the output so far.
  PenaltyHistory(absl::Span<const int32_t> prompt,
                 absl::Span<const int32_t> output, bool with_prompt);

  // One more generated token.
  void AddOutput(int32_t id);

  absl::Span<const TokenHistoryEntry> entries() const { return entries_; }

 private:
  // The entry of `id`, appended with count 0 when new.
  TokenHistoryEntry& Entry(int32_t id);

  std::vector<TokenHistoryEntry> entries_;
  absl::flat_hash_map<int32_t, int32_t> index_;  // id → position in entries_
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_RUNTIME_PENALTY_HISTORY_H_

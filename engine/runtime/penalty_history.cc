#include "engine/runtime/penalty_history.h"

namespace tributary {

PenaltyHistory::PenaltyHistory(absl::Span<const int32_t> prompt,
                               absl::Span<const int32_t> output,
                               bool with_prompt) {
  if (with_prompt) {
    for (int32_t id : prompt) Entry(id);
  }
  for (int32_t id : output) AddOutput(id);
}

void PenaltyHistory::AddOutput(int32_t id) { ++Entry(id).output_count; }

TokenHistoryEntry& PenaltyHistory::Entry(int32_t id) {
  const auto [it, inserted] =
      index_.try_emplace(id, static_cast<int32_t>(entries_.size()));
  if (inserted) entries_.push_back(TokenHistoryEntry{id, 0, 0.0f});
  return entries_[static_cast<size_t>(it->second)];
}

}  // namespace tributary

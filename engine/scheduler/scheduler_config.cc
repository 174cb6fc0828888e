#include "engine/scheduler/scheduler_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "engine/scheduler/range_check.h"

namespace tributary {
namespace {

// The same bounds as CacheConfig::Validate, so that a valid scheduler config
// always gives a valid cache config.
constexpr int64_t kMaxKvBlocks = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxStateSlots = 65536;
constexpr int64_t kMaxKvBlockSize = 4096;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

absl::Status SchedulerConfig::Validate() const {
  // Upper bounds keep every product and sum below int64 overflow.
  constexpr int64_t kLarge = int64_t{1} << 40;
  RETURN_IF_ERROR(CheckRange("max_running_sequences", max_running_sequences, 1,
                             kMaxStateSlots));
  RETURN_IF_ERROR(
      CheckRange("max_tokens_per_step", max_tokens_per_step, 1, kLarge));
  RETURN_IF_ERROR(CheckRange("max_waiting", max_waiting, 1, kLarge));
  RETURN_IF_ERROR(CheckRange("num_kv_blocks", num_kv_blocks, 1, kMaxKvBlocks));
  RETURN_IF_ERROR(
      CheckRange("kv_block_size", kv_block_size, 1, kMaxKvBlockSize));
  RETURN_IF_ERROR(
      CheckRange("num_state_slots", num_state_slots, 1, kMaxStateSlots));
  RETURN_IF_ERROR(
      CheckRange("max_sequence_tokens", max_sequence_tokens, 1, kLarge));
  return absl::OkStatus();
}

absl::StatusOr<CacheCapacity> DeriveCacheCapacity(
    const CacheMemoryBudget& budget) {
  if (budget.memory_budget_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory_budget_bytes = ", budget.memory_budget_bytes, " must be > 0"));
  }
  if (budget.kv_block_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv_block_bytes = ", budget.kv_block_bytes, " must be > 0"));
  }
  if (budget.state_slot_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "state_slot_bytes = ", budget.state_slot_bytes, " must be > 0"));
  }
  RETURN_IF_ERROR(
      CheckRange("kv_block_size", budget.kv_block_size, 1, kMaxKvBlockSize));
  RETURN_IF_ERROR(CheckRange("max_running_sequences",
                             budget.max_running_sequences, 1, kMaxStateSlots));
  if (budget.max_sequence_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_sequence_tokens = ", budget.max_sequence_tokens, " must be > 0"));
  }
  // Divisions rather than products, so that no input overflows.
  const int64_t one_sequence_blocks =
      CeilDiv(budget.max_sequence_tokens, budget.kv_block_size);
  const int64_t affordable_blocks =
      budget.memory_budget_bytes / budget.kv_block_bytes;
  if (one_sequence_blocks > affordable_blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory_budget_bytes = ", budget.memory_budget_bytes,
                     " cannot hold the ", one_sequence_blocks,
                     " KV blocks of one sequence of max_sequence_tokens = ",
                     budget.max_sequence_tokens));
  }
  const int64_t left_bytes =
      budget.memory_budget_bytes - one_sequence_blocks * budget.kv_block_bytes;
  const int64_t slots = std::min(left_bytes / budget.state_slot_bytes,
                                 budget.max_running_sequences);
  if (slots < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "memory_budget_bytes = ", budget.memory_budget_bytes,
        " cannot hold one state slot of state_slot_bytes = ",
        budget.state_slot_bytes, " besides the KV blocks of one sequence"));
  }
  const int64_t kv_bytes =
      budget.memory_budget_bytes - slots * budget.state_slot_bytes;
  CacheCapacity capacity;
  capacity.num_state_slots = slots;
  capacity.num_kv_blocks =
      std::min(kv_bytes / budget.kv_block_bytes, kMaxKvBlocks);
  return capacity;
}

}  // namespace tributary

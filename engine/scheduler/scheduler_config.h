// The scheduler's limits (one plain struct, validated once) and the helper
// that sizes the cache pools from a memory budget.
#ifndef TRIBUTARY_ENGINE_SCHEDULER_SCHEDULER_CONFIG_H_
#define TRIBUTARY_ENGINE_SCHEDULER_SCHEDULER_CONFIG_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tributary {

struct SchedulerConfig {
  // Sequences holding a state slot and KV blocks at once (running, including
  // those in the middle of a chunked prefill).
  int64_t max_running_sequences = 64;
  // The step's token budget: prefill chunks and decode tokens together.
  int64_t max_tokens_per_step = 512;
  // Bound of the waiting queue: Add fails with RESOURCE_EXHAUSTED when it
  // already holds max_waiting sequences (preempted ones included).
  // Preemption itself never fails, since those sequences were accepted
  // already, so the queue holds at most max_waiting + max_running_sequences.
  int64_t max_waiting = 1024;
  // The cache pools, as in CacheConfig (engine/decoder/hybrid_decoder.h).
  int64_t num_kv_blocks = 0;
  int64_t kv_block_size = 16;  // tokens per block
  int64_t num_state_slots = 0;
  // Context limit: prompt + max_new_tokens of one request.
  int64_t max_sequence_tokens = 4096;

  // INVALID_ARGUMENT naming the first field out of range.
  absl::Status Validate() const;
};

// What DeriveCacheCapacity needs. The byte sizes come from the model config
// (the caller computes them; the scheduler knows no model): for the 27B model
// in bf16, kv_block_bytes = 16 tokens × 64 KiB = 1 MiB and state_slot_bytes =
// 144 MiB (design.md §3).
struct CacheMemoryBudget {
  int64_t memory_budget_bytes = 0;  // for KV blocks and state slots together
  int64_t kv_block_bytes = 0;       // one block in every attention layer
  int64_t state_slot_bytes = 0;     // one slot in every GDN layer
  int64_t kv_block_size = 16;       // tokens per block
  int64_t max_running_sequences = 64;
  int64_t max_sequence_tokens = 4096;
};

struct CacheCapacity {
  int64_t num_kv_blocks = 0;
  int64_t num_state_slots = 0;
};

// Splits a memory budget between state slots and KV blocks:
//  1. reserve the KV blocks of one sequence of max_sequence_tokens, so that
//     every request that passes the context limit can run alone;
//  2. give state slots as many sequences as can run at once, at most
//     max_running_sequences (a slot more than that is never used);
//  3. give the rest to KV blocks.
// So a large state (144 MiB a sequence for 27B) lowers the number of slots
// before it starves the KV pool. INVALID_ARGUMENT naming the field when a
// size is not positive or the budget cannot hold one slot and one full-length
// sequence. The counts are capped at the limits SchedulerConfig::Validate
// accepts.
absl::StatusOr<CacheCapacity> DeriveCacheCapacity(
    const CacheMemoryBudget& budget);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SCHEDULER_SCHEDULER_CONFIG_H_

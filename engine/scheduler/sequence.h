// One request as the scheduler sees it: its tokens, how many of them are in
// the caches, and the blocks and slot that hold them.
#ifndef TRIBUTARY_ENGINE_SCHEDULER_SEQUENCE_H_
#define TRIBUTARY_ENGINE_SCHEDULER_SEQUENCE_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"

namespace tributary {

// What Scheduler::Add takes.
struct SequenceRequest {
  uint64_t id = 0;              // unique among the scheduler's sequences
  std::vector<int32_t> prompt;  // token ids, not empty
  int64_t max_new_tokens = 1;   // >= 1
  int priority = 0;             // higher is admitted first
};

enum class SequenceState {
  kWaiting,    // accepted, never admitted
  kRunning,    // holds a state slot and the KV blocks of its computed tokens
  kPreempted,  // evicted by recompute; waiting again, caches dropped
  kFinished,   // finished or cancelled; forgotten at the next Schedule()
};

absl::string_view SequenceStateName(SequenceState state);

struct Sequence {
  uint64_t id = 0;
  int priority = 0;
  int64_t max_new_tokens = 0;
  int64_t num_prompt_tokens = 0;
  // Prompt then generated ids. Kept whole because a preempted sequence
  // recomputes all of them.
  std::vector<int32_t> tokens;
  // Tokens whose keys, values and GDN state are in the caches: positions
  // [0, num_computed_tokens). Zero while waiting or preempted.
  int64_t num_computed_tokens = 0;
  // Physical KV blocks of logical blocks 0, 1, …; empty unless running.
  std::vector<int32_t> block_table;
  int32_t state_slot = -1;  // -1 unless running
  SequenceState state = SequenceState::kWaiting;
  bool cancelled = false;  // finished by Cancel rather than by the engine
  // Order of the latest admission; the largest running one is preempted
  // first.
  uint64_t admission_order = 0;
  int64_t num_preemptions = 0;
  // Every token known at the latest admission is cached: the sequence's
  // steps are now decodes of one generated token each.
  bool prefill_done = false;

  int64_t num_generated_tokens() const {
    return static_cast<int64_t>(tokens.size()) - num_prompt_tokens;
  }
  int64_t num_uncomputed_tokens() const {
    return static_cast<int64_t>(tokens.size()) - num_computed_tokens;
  }
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SCHEDULER_SEQUENCE_H_

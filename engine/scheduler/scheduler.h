// Continuous (iteration-level) batching as pure logic (design.md §2, §3):
// which sequences run in the next forward step and how many tokens each,
// under the step budgets, with the KV-block and state-slot accounting and
// preemption by recompute. No threads, no clock, no backend, no model.
//
// The engine loop:
//   Add / Cancel (requests and cancellations from the inbox)
//   plan = Schedule()            -> reset the fresh state slots, run
//                                   Forward(TakeBatchLayout(&plan),
//                                   plan.token_ids), sample
//   Update(result)               -> tokens appended, finished sequences freed
// A non-empty plan must be answered by Update() before the next Schedule().
//
// Policy of Schedule():
//  1. Decodes of running sequences, oldest admission first (1 token of the
//     budget each, and a new KV block when a block boundary is crossed).
//  2. The next prefill chunk of running sequences in the middle of a prefill,
//     oldest first, as large as the token budget and the free blocks allow.
//  3. Admission of waiting sequences, highest priority first and FIFO within
//     a priority, while a running place (max_running_sequences), token
//     budget, a free state slot and a free block for the first chunk remain.
//     Strict order: when the head of the queue cannot be admitted, nothing
//     behind it is (no starvation of long prompts). Nothing is admitted in a
//     step that preempted (the freed blocks would be taken back at once).
//  KV blocks are allocated as tokens are scheduled, never for the whole
//  prompt + max_new_tokens up front. When a running sequence cannot get a
//  single token's block, the newest running sequence (latest admission) is
//  preempted: blocks and slot freed, put back at the front of the waiting
//  queue of its priority with all its tokens (prompt + generated) to
//  recompute. It may be the sequence itself. Priority only orders admission;
//  it never preempts. Add rejects a request whose prompt + max_new_tokens
//  could not fit in the whole KV pool, so a sequence running alone always
//  progresses.
//
// Thread safety: none (the engine thread owns it). Cost per Schedule():
// O(running + admitted + blocks allocated); Add O(prompt); Cancel of a
// waiting sequence O(waiting of its priority).
#ifndef TRIBUTARY_ENGINE_SCHEDULER_SCHEDULER_H_
#define TRIBUTARY_ENGINE_SCHEDULER_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/scheduler/block_allocator.h"
#include "engine/scheduler/scheduler_config.h"
#include "engine/scheduler/sequence.h"
#include "engine/scheduler/state_slot_allocator.h"
#include "engine/scheduler/step_plan.h"

namespace tributary {

class Scheduler {
 public:
  // Validates `config` (INVALID_ARGUMENT naming the field).
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(
      const SchedulerConfig& config);

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Errors, checked in this order:
  //  ALREADY_EXISTS     the id is in use (not yet forgotten: a finished
  //                     sequence is forgotten at the next Schedule());
  //  INVALID_ARGUMENT   empty prompt, a negative prompt id, max_new_tokens
  //                     < 1, prompt + max_new_tokens over
  //                     max_sequence_tokens or over the whole KV pool
  //                     (num_kv_blocks), each naming the field;
  //  RESOURCE_EXHAUSTED the waiting queue holds max_waiting sequences.
  // On error nothing has changed.
  absl::Status Add(SequenceRequest request);

  // Cancels a waiting, preempted or running sequence: its blocks and slot are
  // freed now, and the next Schedule() reports it once in cancelled_ids. When
  // it is in the plan in flight, Update() ignores its output. NOT_FOUND for
  // an unknown or already finished id.
  absl::Status Cancel(uint64_t id);

  // Plans the next step (policy above). FAILED_PRECONDITION when the previous
  // non-empty plan has not been answered by Update(). Forgets the sequences
  // finished before this call.
  absl::StatusOr<StepPlan> Schedule();

  // Applies the result of the plan in flight: every scheduled chunk is now
  // cached; sampled tokens are appended; finished sequences free their
  // blocks and slot. Checked before anything changes (INVALID_ARGUMENT): ids
  // not in the plan or repeated, a token for a sequence that did not sample,
  // a negative token, a sampling sequence with neither token nor finish, a
  // token that reaches max_new_tokens without finishing. Outputs of
  // sequences cancelled since the plan are ignored. FAILED_PRECONDITION when
  // no plan is in flight (an empty result is then accepted as a no-op).
  absl::Status Update(const StepResult& result);

  // Waiting sequences, preempted ones included.
  int64_t num_waiting() const { return num_waiting_; }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  // Every sequence not yet forgotten, finished ones included.
  int64_t num_sequences() const {
    return static_cast<int64_t>(sequences_.size());
  }
  bool has_unfinished() const { return num_waiting_ > 0 || !running_.empty(); }
  int64_t num_free_kv_blocks() const { return blocks_.num_free(); }
  int64_t num_free_state_slots() const { return slots_.num_free(); }
  // Fractions in [0, 1] of the pools in use (for metrics).
  double kv_block_usage() const;
  double state_slot_usage() const;

  // NOT_FOUND when unknown or forgotten.
  absl::StatusOr<SequenceState> GetState(uint64_t id) const;
  // nullptr when unknown or forgotten; valid until the next non-const call.
  const Sequence* FindSequence(uint64_t id) const;

  const SchedulerConfig& config() const { return config_; }
  const BlockAllocator& block_allocator() const { return blocks_; }
  const StateSlotAllocator& state_slot_allocator() const { return slots_; }

  // Checks the bookkeeping: every allocated block owned by exactly its
  // reference count of running sequences and free otherwise, block tables
  // exactly covering the cached (and in-flight) positions, distinct slots,
  // the queues matching the states. O(sequences + blocks): for tests and
  // debug checks. INTERNAL describing the first violation.
  absl::Status CheckInvariants() const;

 private:
  // A scheduled chunk of the plan in flight.
  struct InFlight {
    uint64_t id = 0;
    int64_t num_tokens = 0;
    bool completes_prefill = false;
    bool samples_token = false;
  };

  explicit Scheduler(const SchedulerConfig& config);

  int64_t CeilBlocks(int64_t num_tokens) const;
  // Schedules `n` tokens of running `seq` (its blocks already allocated).
  ScheduledSequence MakeEntry(const Sequence& seq, int64_t n, bool is_decode,
                              bool completes_prefill) const;
  // Grows the block table to cover `num_tokens` cached tokens.
  absl::Status GrowBlockTable(Sequence& seq, int64_t num_tokens);
  // Frees the blocks and slot of a running sequence, removes it from
  // running_ (its state is the caller's business).
  absl::Status ReleaseRunning(Sequence& seq);
  // Preempts the newest running sequence; drops it from `plan` (giving its
  // tokens back to `budget`) when it was scheduled already. Returns its id.
  absl::StatusOr<uint64_t> PreemptNewest(StepPlan& plan, int64_t& budget);
  // Tries to schedule running `seq`; false when it was preempted.
  absl::StatusOr<bool> ScheduleRunning(Sequence& seq, StepPlan& plan,
                                       int64_t& budget, bool& preempted_any);
  absl::Status AdmitWaiting(StepPlan& plan, int64_t& budget);
  absl::Status ValidateResult(const StepResult& result) const;

  SchedulerConfig config_;
  BlockAllocator blocks_;
  StateSlotAllocator slots_;
  absl::flat_hash_map<uint64_t, Sequence> sequences_;
  // Waiting ids by priority, highest first; FIFO within a priority, with
  // preempted sequences put back at the front.
  std::map<int, std::deque<uint64_t>, std::greater<int>> waiting_;
  int64_t num_waiting_ = 0;
  // Running ids in admission order: the back is the newest.
  std::vector<uint64_t> running_;
  uint64_t next_admission_order_ = 1;
  // Cancelled since the last Schedule(), to report once.
  std::vector<uint64_t> cancelled_ids_;
  // Finished or cancelled, to forget at the next Schedule().
  std::vector<uint64_t> finished_ids_;
  bool plan_in_flight_ = false;
  std::vector<InFlight> in_flight_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SCHEDULER_SCHEDULER_H_

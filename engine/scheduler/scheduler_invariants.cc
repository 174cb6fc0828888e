// Scheduler::CheckInvariants: the bookkeeping audit, apart from the policy
// because it is long and only tests and debug checks call it.
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "engine/scheduler/scheduler.h"  // IWYU pragma: associated

namespace tributary {

absl::Status Scheduler::CheckInvariants() const {
  absl::flat_hash_map<uint64_t, int64_t> in_flight_tokens;
  if (plan_in_flight_) {
    for (const InFlight& f : in_flight_) in_flight_tokens[f.id] = f.num_tokens;
  }
  std::vector<int32_t> owners(static_cast<size_t>(blocks_.capacity()), 0);
  std::vector<bool> slot_owned(static_cast<size_t>(slots_.capacity()), false);
  int64_t num_running_seen = 0;
  int64_t num_waiting_seen = 0;
  for (const auto& [id, seq] : sequences_) {
    if (seq.id != id) return absl::InternalError("sequence id mismatch");
    if (seq.num_computed_tokens < 0 ||
        seq.num_computed_tokens > static_cast<int64_t>(seq.tokens.size())) {
      return absl::InternalError(absl::StrCat(
          "sequence ", id, " num_computed_tokens = ", seq.num_computed_tokens,
          " outside [0, ", seq.tokens.size(), "]"));
    }
    if (seq.num_generated_tokens() > seq.max_new_tokens) {
      return absl::InternalError(
          absl::StrCat("sequence ", id, " generated past max_new_tokens"));
    }
    if (seq.state != SequenceState::kRunning) {
      if (!seq.block_table.empty() || seq.state_slot != -1 ||
          seq.num_computed_tokens != 0) {
        return absl::InternalError(
            absl::StrCat("sequence ", id, " is ", SequenceStateName(seq.state),
                         " but holds blocks, a slot or cached tokens"));
      }
      if (seq.state != SequenceState::kFinished) ++num_waiting_seen;
      continue;
    }
    ++num_running_seen;
    if (seq.state_slot < 0 || seq.state_slot >= slots_.capacity() ||
        !slots_.in_use(seq.state_slot) || slot_owned[seq.state_slot]) {
      return absl::InternalError(absl::StrCat("sequence ", id,
                                              " state_slot = ", seq.state_slot,
                                              " is invalid, free or shared"));
    }
    slot_owned[seq.state_slot] = true;
    auto f = in_flight_tokens.find(id);
    const int64_t cached_tokens =
        seq.num_computed_tokens + (f == in_flight_tokens.end() ? 0 : f->second);
    if (static_cast<int64_t>(seq.block_table.size()) !=
        CeilBlocks(cached_tokens)) {
      return absl::InternalError(
          absl::StrCat("sequence ", id, " holds ", seq.block_table.size(),
                       " blocks for ", cached_tokens, " tokens"));
    }
    if (!plan_in_flight_ && seq.prefill_done &&
        seq.num_uncomputed_tokens() != 1) {
      return absl::InternalError(absl::StrCat("decoding sequence ", id, " has ",
                                              seq.num_uncomputed_tokens(),
                                              " uncomputed tokens"));
    }
    for (int32_t block : seq.block_table) {
      if (block < 0 || block >= blocks_.capacity()) {
        return absl::InternalError(
            absl::StrCat("sequence ", id, " block ", block, " out of range"));
      }
      ++owners[block];
    }
  }
  int64_t num_owned_blocks = 0;
  for (int32_t b = 0; b < blocks_.capacity(); ++b) {
    if (owners[b] != blocks_.ref_count(b)) {
      return absl::InternalError(absl::StrCat("block ", b, " has ", owners[b],
                                              " owners but reference count ",
                                              blocks_.ref_count(b)));
    }
    if (owners[b] > 0) ++num_owned_blocks;
  }
  if (num_owned_blocks + blocks_.num_free() != blocks_.capacity()) {
    return absl::InternalError(
        absl::StrCat(num_owned_blocks, " owned + ", blocks_.num_free(),
                     " free blocks != capacity ", blocks_.capacity()));
  }
  if (num_running_seen + slots_.num_free() != slots_.capacity()) {
    return absl::InternalError(
        absl::StrCat(num_running_seen, " running + ", slots_.num_free(),
                     " free slots != capacity ", slots_.capacity()));
  }
  if (num_running_seen != num_running() ||
      num_running() > config_.max_running_sequences) {
    return absl::InternalError(absl::StrCat(
        num_running_seen, " running sequences, running_ has ", num_running()));
  }
  uint64_t last_order = 0;
  for (uint64_t id : running_) {
    const Sequence* seq = FindSequence(id);
    if (seq == nullptr || seq->state != SequenceState::kRunning ||
        seq->admission_order <= last_order) {
      return absl::InternalError(absl::StrCat(
          "running_ entry ", id, " is not running or out of order"));
    }
    last_order = seq->admission_order;
  }
  int64_t num_queued = 0;
  for (const auto& [priority, queue] : waiting_) {
    if (queue.empty()) return absl::InternalError("empty waiting bucket");
    for (uint64_t id : queue) {
      const Sequence* seq = FindSequence(id);
      if (seq == nullptr || seq->priority != priority ||
          (seq->state != SequenceState::kWaiting &&
           seq->state != SequenceState::kPreempted)) {
        return absl::InternalError(
            absl::StrCat("waiting entry ", id, " is not waiting"));
      }
      ++num_queued;
    }
  }
  if (num_queued != num_waiting_ || num_waiting_seen != num_waiting_) {
    return absl::InternalError(
        absl::StrCat(num_queued, " queued, ", num_waiting_seen,
                     " waiting states, count ", num_waiting_));
  }
  return absl::OkStatus();
}

}  // namespace tributary

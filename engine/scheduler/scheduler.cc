#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tributary {

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(
    const SchedulerConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  return std::unique_ptr<Scheduler>(new Scheduler(config));
}

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_(config),
      blocks_(config.num_kv_blocks),
      slots_(config.num_state_slots) {}

int64_t Scheduler::CeilBlocks(int64_t num_tokens) const {
  return (num_tokens + config_.kv_block_size - 1) / config_.kv_block_size;
}

absl::Status Scheduler::Add(SequenceRequest request) {
  if (sequences_.contains(request.id)) {
    return absl::AlreadyExistsError(
        absl::StrCat("id = ", request.id, " is already in use"));
  }
  if (request.prompt.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt of request ", request.id, " is empty"));
  }
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    if (request.prompt[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt[", i, "] = ", request.prompt[i], " must be >= 0"));
    }
  }
  if (request.max_new_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_new_tokens = ", request.max_new_tokens, " must be >= 1"));
  }
  const int64_t num_prompt_tokens = static_cast<int64_t>(request.prompt.size());
  // Subtraction, not addition: max_new_tokens may be near INT64_MAX.
  if (num_prompt_tokens > config_.max_sequence_tokens ||
      request.max_new_tokens >
          config_.max_sequence_tokens - num_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt length ", num_prompt_tokens,
        " + max_new_tokens = ", request.max_new_tokens,
        " exceeds max_sequence_tokens = ", config_.max_sequence_tokens));
  }
  // A sequence must be able to run alone, or preemption would loop: all its
  // tokens have to fit in the whole pool. (The last generated token is never
  // cached, so this is one token conservative.)
  const int64_t num_blocks_needed =
      CeilBlocks(num_prompt_tokens + request.max_new_tokens);
  if (num_blocks_needed > blocks_.capacity()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt length ", num_prompt_tokens,
        " + max_new_tokens = ", request.max_new_tokens, " needs ",
        num_blocks_needed, " KV blocks of ", config_.kv_block_size,
        " tokens but the pool holds num_kv_blocks = ", blocks_.capacity()));
  }
  if (num_waiting_ >= config_.max_waiting) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the waiting queue is full (max_waiting = ", config_.max_waiting, ")"));
  }
  Sequence seq;
  seq.id = request.id;
  seq.priority = request.priority;
  seq.max_new_tokens = request.max_new_tokens;
  seq.num_prompt_tokens = num_prompt_tokens;
  seq.tokens = std::move(request.prompt);
  seq.state = SequenceState::kWaiting;
  waiting_[seq.priority].push_back(seq.id);
  ++num_waiting_;
  sequences_.emplace(seq.id, std::move(seq));
  return absl::OkStatus();
}

absl::Status Scheduler::Cancel(uint64_t id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) {
    return absl::NotFoundError(absl::StrCat("id = ", id, " is not known"));
  }
  Sequence& seq = it->second;
  switch (seq.state) {
    case SequenceState::kFinished:
      return absl::NotFoundError(
          absl::StrCat("id = ", id, " has already finished"));
    case SequenceState::kWaiting:
    case SequenceState::kPreempted: {
      auto bucket = waiting_.find(seq.priority);
      if (bucket == waiting_.end()) {
        return absl::InternalError(
            absl::StrCat("waiting sequence ", id, " is not queued"));
      }
      std::deque<uint64_t>& queue = bucket->second;
      auto pos = std::find(queue.begin(), queue.end(), id);
      if (pos == queue.end()) {
        return absl::InternalError(
            absl::StrCat("waiting sequence ", id, " is not queued"));
      }
      queue.erase(pos);
      if (queue.empty()) waiting_.erase(bucket);
      --num_waiting_;
      break;
    }
    case SequenceState::kRunning:
      RETURN_IF_ERROR(ReleaseRunning(seq));
      break;
  }
  seq.state = SequenceState::kFinished;
  seq.cancelled = true;
  seq.num_computed_tokens = 0;
  cancelled_ids_.push_back(id);
  finished_ids_.push_back(id);
  return absl::OkStatus();
}

absl::Status Scheduler::GrowBlockTable(Sequence& seq, int64_t num_tokens) {
  const int64_t missing =
      CeilBlocks(num_tokens) - static_cast<int64_t>(seq.block_table.size());
  if (missing <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<int32_t> blocks, blocks_.Allocate(missing));
  seq.block_table.insert(seq.block_table.end(), blocks.begin(), blocks.end());
  return absl::OkStatus();
}

absl::Status Scheduler::ReleaseRunning(Sequence& seq) {
  for (int32_t block : seq.block_table) RETURN_IF_ERROR(blocks_.Free(block));
  seq.block_table.clear();
  RETURN_IF_ERROR(slots_.Free(seq.state_slot));
  seq.state_slot = -1;
  auto pos = std::find(running_.begin(), running_.end(), seq.id);
  if (pos == running_.end()) {
    return absl::InternalError(
        absl::StrCat("running sequence ", seq.id, " is not in running_"));
  }
  running_.erase(pos);
  return absl::OkStatus();
}

ScheduledSequence Scheduler::MakeEntry(const Sequence& seq, int64_t n,
                                       bool is_decode,
                                       bool completes_prefill) const {
  ScheduledSequence entry;
  entry.id = seq.id;
  entry.num_tokens = n;
  entry.first_position = seq.num_computed_tokens;
  entry.state_slot = seq.state_slot;
  entry.block_table = seq.block_table;
  entry.reset_state_slot = seq.num_computed_tokens == 0;
  entry.completes_prefill = completes_prefill;
  entry.is_decode = is_decode;
  return entry;
}

absl::StatusOr<uint64_t> Scheduler::PreemptNewest(StepPlan& plan,
                                                  int64_t& budget) {
  if (running_.empty()) {
    return absl::InternalError("preemption with no running sequence");
  }
  const uint64_t victim_id = running_.back();
  Sequence& victim = sequences_.find(victim_id)->second;
  RETURN_IF_ERROR(ReleaseRunning(victim));
  // Recompute: the caches are dropped, the tokens are kept.
  victim.num_computed_tokens = 0;
  victim.prefill_done = false;
  victim.state = SequenceState::kPreempted;
  ++victim.num_preemptions;
  // Front of its priority: it was admitted before everything still waiting
  // there. Several victims in one step are preempted newest first, so the
  // older ones end up ahead, in admission order.
  waiting_[victim.priority].push_front(victim_id);
  ++num_waiting_;
  plan.preempted_ids.push_back(victim_id);
  for (auto it = plan.sequences.begin(); it != plan.sequences.end(); ++it) {
    if (it->id == victim_id) {
      budget += it->num_tokens;
      plan.sequences.erase(it);
      break;
    }
  }
  return victim_id;
}

absl::StatusOr<bool> Scheduler::ScheduleRunning(Sequence& seq, StepPlan& plan,
                                                int64_t& budget,
                                                bool& preempted_any) {
  const bool is_decode = seq.prefill_done;
  const int64_t uncomputed = seq.num_uncomputed_tokens();
  const int64_t want = is_decode ? 1 : std::min(uncomputed, budget);
  while (true) {
    // Room left in the last block, plus every free block.
    const int64_t slack =
        static_cast<int64_t>(seq.block_table.size()) * config_.kv_block_size -
        seq.num_computed_tokens;
    const int64_t fit = slack + blocks_.num_free() * config_.kv_block_size;
    // A prefill chunk shrinks to the free blocks rather than preempt: a
    // smaller chunk still makes progress.
    const int64_t n = std::min(want, fit);
    if (n >= 1) {
      RETURN_IF_ERROR(GrowBlockTable(seq, seq.num_computed_tokens + n));
      plan.sequences.push_back(
          MakeEntry(seq, n, is_decode, !is_decode && n == uncomputed));
      budget -= n;
      return true;
    }
    ASSIGN_OR_RETURN(const uint64_t victim, PreemptNewest(plan, budget));
    preempted_any = true;
    if (victim == seq.id) return false;
  }
}

absl::Status Scheduler::AdmitWaiting(StepPlan& plan, int64_t& budget) {
  while (num_waiting_ > 0 && budget > 0 &&
         num_running() < config_.max_running_sequences &&
         slots_.num_free() > 0) {
    auto bucket = waiting_.begin();
    const uint64_t id = bucket->second.front();
    Sequence& seq = sequences_.find(id)->second;
    const int64_t uncomputed = seq.num_uncomputed_tokens();
    const int64_t n = std::min(
        {uncomputed, budget, blocks_.num_free() * config_.kv_block_size});
    // Head-of-line: when the head cannot start, nothing behind it may
    // overtake it (otherwise short prompts could starve a long one).
    if (n < 1) break;
    bucket->second.pop_front();
    if (bucket->second.empty()) waiting_.erase(bucket);
    --num_waiting_;
    ASSIGN_OR_RETURN(seq.state_slot, slots_.Allocate());
    RETURN_IF_ERROR(GrowBlockTable(seq, n));
    seq.state = SequenceState::kRunning;
    seq.admission_order = next_admission_order_++;
    seq.prefill_done = false;
    running_.push_back(id);
    plan.sequences.push_back(MakeEntry(seq, n, /*is_decode=*/false,
                                       /*completes_prefill=*/n == uncomputed));
    budget -= n;
  }
  return absl::OkStatus();
}

absl::StatusOr<StepPlan> Scheduler::Schedule() {
  if (plan_in_flight_) {
    return absl::FailedPreconditionError(
        "Schedule() called before Update() answered the previous plan");
  }
  for (uint64_t id : finished_ids_) sequences_.erase(id);
  finished_ids_.clear();

  StepPlan plan;
  plan.cancelled_ids.swap(cancelled_ids_);
  int64_t budget = config_.max_tokens_per_step;
  bool preempted_any = false;
  // A copy: preemption edits running_ while we walk it.
  const std::vector<uint64_t> order = running_;
  for (const bool decode_phase : {true, false}) {
    for (const uint64_t id : order) {
      if (budget <= 0) break;
      auto it = sequences_.find(id);
      if (it == sequences_.end()) continue;
      Sequence& seq = it->second;
      if (seq.state != SequenceState::kRunning ||
          seq.prefill_done != decode_phase) {
        continue;
      }
      ASSIGN_OR_RETURN(const bool scheduled,
                       ScheduleRunning(seq, plan, budget, preempted_any));
      (void)scheduled;
    }
  }
  // After a preemption the free blocks are what the running sequences need
  // next; admitting now would only preempt again.
  if (!preempted_any) RETURN_IF_ERROR(AdmitWaiting(plan, budget));

  in_flight_.clear();
  for (const ScheduledSequence& entry : plan.sequences) {
    const Sequence& seq = sequences_.find(entry.id)->second;
    plan.token_ids.insert(
        plan.token_ids.end(), seq.tokens.begin() + entry.first_position,
        seq.tokens.begin() + entry.first_position + entry.num_tokens);
    in_flight_.push_back(InFlight{entry.id, entry.num_tokens,
                                  entry.completes_prefill,
                                  entry.samples_token()});
  }
  plan_in_flight_ = !plan.sequences.empty();
  return plan;
}

absl::Status Scheduler::ValidateResult(const StepResult& result) const {
  absl::flat_hash_map<uint64_t, size_t> index;
  for (size_t j = 0; j < in_flight_.size(); ++j) index[in_flight_[j].id] = j;
  std::vector<const SequenceOutput*> output_of(in_flight_.size(), nullptr);
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    const SequenceOutput& out = result.outputs[i];
    auto it = index.find(out.id);
    if (it == index.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", i, "].id = ", out.id, " is not in the plan in flight"));
    }
    if (output_of[it->second] != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("outputs[", i, "].id = ", out.id, " is repeated"));
    }
    output_of[it->second] = &out;
    const InFlight& f = in_flight_[it->second];
    const Sequence* seq = FindSequence(out.id);
    if (seq == nullptr || seq->state != SequenceState::kRunning) continue;
    if (!out.has_token) continue;
    if (!f.samples_token) {
      return absl::InvalidArgumentError(
          absl::StrCat("outputs[", i, "].token: sequence ", out.id,
                       " ran a prefill chunk that samples no token"));
    }
    if (out.token < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", i, "].token = ", out.token, " must be >= 0"));
    }
    if (!out.finished &&
        seq->num_generated_tokens() + 1 >= seq->max_new_tokens) {
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", i, "]: sequence ", out.id, " reaches max_new_tokens = ",
          seq->max_new_tokens, " and must be finished"));
    }
  }
  for (size_t j = 0; j < in_flight_.size(); ++j) {
    const InFlight& f = in_flight_[j];
    const Sequence* seq = FindSequence(f.id);
    if (!f.samples_token || seq == nullptr ||
        seq->state != SequenceState::kRunning) {
      continue;
    }
    const SequenceOutput* out = output_of[j];
    if (out == nullptr || (!out->has_token && !out->finished)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", f.id,
                       " sampled but its output has neither a token nor "
                       "finished"));
    }
  }
  return absl::OkStatus();
}

absl::Status Scheduler::Update(const StepResult& result) {
  if (!plan_in_flight_) {
    if (result.outputs.empty()) return absl::OkStatus();
    return absl::FailedPreconditionError("Update() with no plan in flight");
  }
  RETURN_IF_ERROR(ValidateResult(result));
  for (const InFlight& f : in_flight_) {
    Sequence& seq = sequences_.find(f.id)->second;
    if (seq.state != SequenceState::kRunning) continue;  // cancelled since
    seq.num_computed_tokens += f.num_tokens;
    if (f.completes_prefill) seq.prefill_done = true;
  }
  for (const SequenceOutput& out : result.outputs) {
    Sequence& seq = sequences_.find(out.id)->second;
    if (seq.state != SequenceState::kRunning) continue;
    if (out.has_token) seq.tokens.push_back(out.token);
    if (out.finished) {
      RETURN_IF_ERROR(ReleaseRunning(seq));
      seq.state = SequenceState::kFinished;
      seq.num_computed_tokens = 0;
      finished_ids_.push_back(seq.id);
    }
  }
  plan_in_flight_ = false;
  in_flight_.clear();
  return absl::OkStatus();
}

double Scheduler::kv_block_usage() const {
  return 1.0 - static_cast<double>(blocks_.num_free()) /
                   static_cast<double>(blocks_.capacity());
}

double Scheduler::state_slot_usage() const {
  return 1.0 - static_cast<double>(slots_.num_free()) /
                   static_cast<double>(slots_.capacity());
}

absl::StatusOr<SequenceState> Scheduler::GetState(uint64_t id) const {
  const Sequence* seq = FindSequence(id);
  if (seq == nullptr) {
    return absl::NotFoundError(absl::StrCat("id = ", id, " is not known"));
  }
  return seq->state;
}

const Sequence* Scheduler::FindSequence(uint64_t id) const {
  auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : &it->second;
}

}  // namespace tributary

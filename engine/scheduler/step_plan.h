// The contract of one step between the scheduler and the engine: the plan
// the scheduler hands out (Scheduler::Schedule) and the result the engine
// hands back (Scheduler::Update).
#ifndef TRIBUTARY_ENGINE_SCHEDULER_STEP_PLAN_H_
#define TRIBUTARY_ENGINE_SCHEDULER_STEP_PLAN_H_

#include <cstdint>
#include <vector>


namespace tributary {

struct ScheduledSequence {
  uint64_t id = 0;
  // New tokens this step: a prefill chunk of the sequence's uncomputed
  // tokens, or 1 for a decode.
  int64_t num_tokens = 0;
  // Position of the first new token (= tokens already cached).
  int64_t first_position = 0;
  int32_t state_slot = 0;
  // Covers positions [0, first_position + num_tokens) exactly.
  std::vector<int32_t> block_table;
  // The slot was just allocated: the engine must zero it
  // (HybridDecoder::ResetStateSlot) before the step. True exactly when
  // first_position == 0.
  bool reset_state_slot = false;
  // This chunk is the last of a prefill (of the prompt, or of prompt and
  // generated tokens when recomputing after a preemption).
  bool completes_prefill = false;
  // A decode of the sequence's last generated token.
  bool is_decode = false;

  // After this step every known token is cached, so the logits of the last
  // new token give the next token: the engine samples one (or finishes the
  // sequence).
  bool samples_token() const { return completes_prefill || is_decode; }
};

struct StepPlan {
  // In step order: decodes, then continuing prefill chunks, then newly
  // admitted sequences. Empty when nothing can run.
  std::vector<ScheduledSequence> sequences;
  // The new tokens of every scheduled sequence, in step order
  // ([num_tokens()]): the `ids` of HybridDecoder::Forward.
  std::vector<int32_t> token_ids;
  // Sequences preempted by this Schedule(): their caches are dropped and
  // they wait again (the engine may report it; no event for the client).
  std::vector<uint64_t> preempted_ids;
  // Sequences cancelled since the previous Schedule(), each reported once,
  // so the engine can finish their sinks.
  std::vector<uint64_t> cancelled_ids;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  bool empty() const { return sequences.empty(); }
};

// What the engine did with one scheduled sequence.
struct SequenceOutput {
  uint64_t id = 0;
  // A sampled token; only for a sequence whose ScheduledSequence has
  // samples_token(). Appended to the sequence (its next step decodes it).
  bool has_token = false;
  int32_t token = 0;
  // The engine finished the sequence (EOS, stop, max_new_tokens, an error):
  // its blocks and slot are freed.
  bool finished = false;

  // The sequence continues with `token`.
  static SequenceOutput Continues(uint64_t id, int32_t token) {
    SequenceOutput out;
    out.id = id;
    out.has_token = true;
    out.token = token;
    return out;
  }
  // The sequence ends here (its last token, if any, was sent already).
  static SequenceOutput Finished(uint64_t id) {
    SequenceOutput out;
    out.id = id;
    out.finished = true;
    return out;
  }
};

// Outputs of the last plan's sequences, in any order. A sequence that
// samples_token() must have a token or be finished; any other may be
// omitted (its chunk is simply counted as computed).
struct StepResult {
  std::vector<SequenceOutput> outputs;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_SCHEDULER_STEP_PLAN_H_

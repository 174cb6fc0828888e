// Internal to the engine: the state of Engine's implementation, shared by
// engine.cc (the public face: Create, Submit, Cancel, Shutdown) and
// engine_loop.cc (the engine thread's step loop). Not part of the API.
#ifndef TRIBUTARY_ENGINE_RUNTIME_ENGINE_IMPL_H_
#define TRIBUTARY_ENGINE_RUNTIME_ENGINE_IMPL_H_

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "engine/backend/backend.h"
#include "engine/runtime/engine.h"
#include "engine/decoder/hybrid_decoder.h"
#include "engine/model/model_directory.h"
#include "engine/runtime/penalty_history.h"
#include "engine/runtime/request_interventions.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/stop_matcher.h"
#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/stream_decoder.h"
#include "engine/tokenizer/tokenizer.h"

namespace tributary {
namespace engine_internal {

// Everything the engine thread keeps about one accepted request. The stream
// decoder and the stop matcher live here, not in the scheduler, so they
// survive a preemption (the recompute only rebuilds the caches).
struct RequestState {
  uint64_t id = 0;
  SamplingParams params;
  std::vector<int32_t> prompt;
  std::vector<int32_t> output;  // generated so far
  int32_t max_new_tokens = 1;
  int priority = 0;
  uint64_t seed = 0;
  std::shared_ptr<TokenSink> sink;
  std::optional<StreamDecoder> decoder;  // with a tokenizer only
  std::optional<StopMatcher> matcher;
  absl::Time submit_time;
  std::optional<absl::Time> first_scheduled_time;
  std::optional<absl::Time> first_token_time;
  bool in_scheduler = false;
  // Residual telemetry asked by the request: the trace rows not yet sent,
  // the running summary, and the first position not yet recorded (a
  // preemption recomputes positions that were recorded already).
  bool want_residual_trace = false;
  std::vector<ResidualTraceToken> pending_trace;
  std::optional<ResidualSummary> residual_summary;
  int64_t next_residual_position = 0;
  // Interventions on the residual stream, and the logit-lens readings not
  // yet sent (with the first position not yet read).
  std::optional<RequestInterventions> interventions;
  std::vector<LensReading> pending_lens;
  int64_t next_lens_position = 0;
  // Device sampling with penalties: the distinct ids and output counts,
  // made when the request first samples on the device, then kept up to
  // date by EmitToken.
  std::optional<PenaltyHistory> penalty_history;
};

// One step's sequences as the engine thread resolves them, in plan order.
struct StepBatch {
  // The request of each scheduled sequence; null where there is none (it
  // failed this step, or a bug) and the sequence is finished already.
  std::vector<RequestState*> requests;
  // The requests' interventions in the step's rows, and whose each lens
  // read is.
  StepInterventions interventions;
  std::vector<std::pair<RequestState*, RequestInterventions::LensRead>>
      lens_owners;
  // What the forward is asked (interventions points into this batch).
  ForwardOptions forward;
  // What goes back to the scheduler.
  StepResult result;

  StepBatch() = default;
  StepBatch(const StepBatch&) = delete;  // forward.interventions points in
  StepBatch& operator=(const StepBatch&) = delete;
};

inline double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

}  // namespace engine_internal

struct Engine::Impl {
  EngineOptions options;
  // Requests that sample, ask logprobs or have penalties get their tokens
  // from the backend (EngineOptions::device_sampling, resolved for the
  // backend).
  bool device_sampling = false;
  std::optional<ModelDirectory> owned_model;
  const ModelDirectory* model = nullptr;
  std::unique_ptr<Tokenizer> owned_tokenizer;
  const Tokenizer* tokenizer = nullptr;
  // Declared before the decoder: destroyed after it.
  std::unique_ptr<Backend> backend;
  std::unique_ptr<HybridDecoder> decoder;
  std::vector<int32_t> eos_ids;
  int64_t vocab_size = 0;
  int64_t context_tokens = 0;
  // How many requests the engine holds before Submit refuses one: every
  // running place (max_running_sequences, at most one per state slot) and
  // the whole waiting queue. Immutable.
  int64_t admission_capacity = 0;

  // --- The inbox and the published state, under mu ---
  mutable std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<engine_internal::RequestState>> inbox_requests;
  std::vector<uint64_t> inbox_cancels;
  bool accepting = true;
  bool failed = false;
  bool stop_requested = false;
  absl::Time deadline = absl::InfiniteFuture();
  // The requests accepted and not finished (active), as of the last
  // Publish(), plus those drained since, less those finished since.
  int64_t published_admitted = 0;
  Counts counts;
  uint64_t next_id = 1;
  std::mt19937_64 seed_generator;

  std::mutex join_mu;
  std::thread thread;

  // --- Engine thread only ---
  std::unique_ptr<Scheduler> scheduler;
  Sampler sampler;
  absl::flat_hash_map<uint64_t, std::unique_ptr<engine_internal::RequestState>>
      active;
  // Accepted, not yet in the scheduler (its queue was full when we tried).
  std::deque<uint64_t> pending;
  bool stalled = false;
  // Finished or cancelled sequences the scheduler has not forgotten yet (it
  // does at the next Schedule()).
  bool needs_forget = false;
  int64_t num_steps = 0;
  int64_t num_preemptions = 0;
  // The current step's residual statistics, reused across steps.
  ResidualSummary step_residuals;

  bool HasWork() const {
    return scheduler->has_unfinished() || !pending.empty();
  }
  bool ShouldStep() const { return (HasWork() && !stalled) || needs_forget; }
  void Run();
  // One Schedule / Forward / sample / Update round. Returns false after a
  // fatal error (the engine failed).
  bool Step();
  // The parts of a step, in order.
  // Bookkeeping of a new plan; false when it runs nothing.
  bool StartStep(const StepPlan& plan);
  // Each scheduled sequence's request; zeroes newly allocated state slots.
  void ResolveRequests(const StepPlan& plan, absl::Time step_start,
                       engine_internal::StepBatch* batch);
  // Interventions and where each row's token is chosen.
  void BuildForwardOptions(const StepPlan& plan,
                           engine_internal::StepBatch* batch);
  // The fault hook, the forward, and a check of its output's shape. The
  // plan's block tables move into the forward's layout.
  absl::StatusOr<ForwardOutput> RunForward(
      StepPlan* plan, const engine_internal::StepBatch& batch);
  // Residual statistics and logit-lens readings into the requests.
  void ReadForward(const StepPlan& plan, const engine_internal::StepBatch& batch,
                   const ForwardOutput& forward);
  // Each sampling sequence's token (or its failure) to its sink, and the
  // outputs for Scheduler::Update.
  void EmitTokens(const StepPlan& plan,
                  const absl::StatusOr<ForwardOutput>& forward,
                  engine_internal::StepBatch* batch);
  // Step statistics to the observer.
  void ReportStep(const StepPlan& plan, absl::Duration step_time,
                  absl::Duration forward_time);
  void AddPending();
  // Ends request `id`: cancelled by its client when `cut` is OK (finish
  // reason kCancelled), else cut by the engine with `cut` as its status.
  void CancelRequest(uint64_t id, absl::Status cut = absl::OkStatus());
  // Cuts every active request with `cut` (not OK).
  void CancelAll(const absl::Status& cut);
  // Sends the final event and forgets the request.
  void Finish(engine_internal::RequestState& r, TokenEvent event);
  void FailRequest(engine_internal::RequestState& r, absl::Status status);
  void Fatal(const absl::Status& status);
  void Publish();
  // Step summary for the observer, per-request traces and summaries.
  void RecordResiduals(const StepPlan& plan,
                       const std::vector<engine_internal::RequestState*>& requests,
                       const ForwardOutput& forward);
  // The next token of `r` from its logits row (the host sampler), or, for a
  // row whose token the backend chose (ForwardOptions::device_choice), that
  // id (-1: the row was not finite) and the logprobs the backend computed
  // (null when the request asks none).
  SequenceOutput Sample(engine_internal::RequestState& r,
                        absl::Span<const float> row);
  SequenceOutput TakeDeviceToken(engine_internal::RequestState& r, int32_t id,
                                 const TokenLogprobs* logprobs);
  // Appends r's penalty entries to `history` and points `choice` at them
  // (making r.penalty_history on first use).
  void AppendHistory(engine_internal::RequestState& r, TokenChoice* choice,
                     std::vector<TokenHistoryEntry>* history);
  SequenceOutput EmitToken(engine_internal::RequestState& r,
                           absl::StatusOr<SampleResult> sample);
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_RUNTIME_ENGINE_IMPL_H_

// The engine thread: drain the inbox, schedule, run the step, sample, stop,
// send events, update the scheduler (design.md §2).
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/runtime/engine_impl.h"
#include "engine/sampling/logprobs.h"
#include "engine/sampling/device_choice.h"
#include "engine/runtime/step_layout.h"

namespace tributary {

using engine_internal::RequestState;
using engine_internal::Seconds;
using engine_internal::StepBatch;

void Engine::Impl::Finish(RequestState& r, TokenEvent event) {
  const absl::Time now = absl::Now();
  event.request_id = r.id;
  event.is_final = true;
  event.usage.num_prompt_tokens = static_cast<int64_t>(r.prompt.size());
  event.usage.num_generated_tokens = static_cast<int64_t>(r.output.size());
  event.timing.queue_seconds =
      Seconds(r.first_scheduled_time.value_or(now) - r.submit_time);
  event.timing.time_to_first_token_seconds =
      r.first_token_time ? Seconds(*r.first_token_time - r.submit_time) : 0.0;
  event.timing.total_seconds = Seconds(now - r.submit_time);
  if (!r.pending_trace.empty()) {
    event.residual_trace = std::move(r.pending_trace);
  }
  if (r.residual_summary)
    event.residual_summary = std::move(r.residual_summary);
  if (!r.pending_lens.empty()) event.logit_lens = std::move(r.pending_lens);
  std::shared_ptr<TokenSink> sink = std::move(r.sink);
  const uint64_t id = r.id;
  active.erase(id);  // r is gone from here on
  {
    // Its place is free before its client hears of the end: a client that
    // submits again at once is not refused for a request already gone.
    std::lock_guard<std::mutex> lock(mu);
    if (published_admitted > 0) --published_admitted;
  }
  sink->OnEvent(event);
}

void Engine::Impl::FailRequest(RequestState& r, absl::Status status) {
  LogError("request ", r.id, " failed: ", status.ToString());
  TokenEvent event;
  event.status = std::move(status);
  Finish(r, std::move(event));
}

void Engine::Impl::CancelRequest(uint64_t id, absl::Status cut) {
  auto it = active.find(id);
  if (it == active.end()) return;  // finished already, or unknown
  RequestState& r = *it->second;
  if (r.in_scheduler) {
    needs_forget = true;
    absl::Status s = scheduler->Cancel(id);
    if (!s.ok()) LogWarning("cancel of request ", id, ": ", s.ToString());
  } else {
    pending.erase(std::remove(pending.begin(), pending.end(), id),
                  pending.end());
  }
  TokenEvent event;
  // Release what was held back: nothing can complete it anymore.
  event.text = r.matcher->Flush();
  if (r.decoder) event.text += r.decoder->Finish();
  if (cut.ok()) {
    event.finish_reason = FinishReason::kCancelled;
  } else {
    event.status = std::move(cut);
  }
  Finish(r, std::move(event));
}

void Engine::Impl::CancelAll(const absl::Status& cut) {
  if (!active.empty()) {
    LogInfo("cutting ", active.size(), " requests: ", cut.message());
  }
  std::vector<uint64_t> ids;
  ids.reserve(active.size());
  for (const auto& [id, r] : active) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) CancelRequest(id, cut);
}

void Engine::Impl::AddPending() {
  while (!pending.empty()) {
    const uint64_t id = pending.front();
    auto it = active.find(id);
    if (it == active.end()) {  // cannot happen: cancel removes it
      pending.pop_front();
      continue;
    }
    RequestState& r = *it->second;
    SequenceRequest seq;
    seq.id = id;
    seq.prompt = r.prompt;
    seq.max_new_tokens = r.max_new_tokens;
    seq.priority = r.priority;
    absl::Status s = scheduler->Add(std::move(seq));
    if (absl::IsResourceExhausted(s)) return;  // retried after the next step
    pending.pop_front();
    if (!s.ok()) {
      FailRequest(r, std::move(s));
      continue;
    }
    r.in_scheduler = true;
  }
}

void Engine::Impl::Publish() {
  std::lock_guard<std::mutex> lock(mu);
  const int64_t waiting =
      scheduler->num_waiting() + static_cast<int64_t>(pending.size());
  published_admitted = static_cast<int64_t>(active.size());
  counts.num_active = static_cast<int64_t>(active.size());
  counts.num_waiting = waiting;
  counts.num_running = scheduler->num_running();
  counts.num_sequences = scheduler->num_sequences();
  counts.num_free_kv_blocks = scheduler->num_free_kv_blocks();
  counts.num_free_state_slots = scheduler->num_free_state_slots();
  counts.num_steps = num_steps;
  counts.num_preemptions = num_preemptions;
}

void Engine::Impl::Fatal(const absl::Status& status) {
  LogError("engine failed: ", status.ToString());
  std::vector<std::unique_ptr<RequestState>> late;
  {
    std::lock_guard<std::mutex> lock(mu);
    failed = true;
    accepting = false;
    late.swap(inbox_requests);
    inbox_cancels.clear();
  }
  const absl::Status error = absl::UnavailableError(
      absl::StrCat("the engine failed: ", status.message()));
  for (auto& r : late) {
    const uint64_t id = r->id;
    active[id] = std::move(r);
  }
  std::vector<uint64_t> ids;
  for (const auto& [id, r] : active) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (uint64_t id : ids) FailRequest(*active[id], error);
  pending.clear();
}

SequenceOutput Engine::Impl::Sample(RequestState& r,
                                    absl::Span<const float> row) {
  const TokenHistory history{r.prompt, r.output};
  return EmitToken(r, sampler.Sample(row, r.params, history, r.seed));
}

void Engine::Impl::AppendHistory(RequestState& r, TokenChoice* choice,
                                 std::vector<TokenHistoryEntry>* history) {
  if (!r.penalty_history) {
    r.penalty_history.emplace(r.prompt, r.output,
                              r.params.repetition_penalty != 1.0f);
  }
  const absl::Span<const TokenHistoryEntry> entries =
      r.penalty_history->entries();
  choice->history_begin = static_cast<int32_t>(history->size());
  choice->history_count = static_cast<int32_t>(entries.size());
  history->insert(history->end(), entries.begin(), entries.end());
}

SequenceOutput Engine::Impl::TakeDeviceToken(RequestState& r, int32_t id,
                                             const TokenLogprobs* logprobs) {
  if (id < 0) {
    return EmitToken(r, absl::InternalError(
                            "the logits row holds a value that is not finite"));
  }
  SampleResult result;
  result.token_id = id;
  if (r.params.num_logprobs.has_value() && logprobs != nullptr) {
    result.logprob = logprobs->chosen;
    for (int32_t k = 0; k < logprobs->count; ++k) {
      result.top_logprobs.push_back(
          {logprobs->top_ids[k], logprobs->top_logprobs[k]});
    }
  }
  return EmitToken(r, result);
}

SequenceOutput Engine::Impl::EmitToken(RequestState& r,
                                       absl::StatusOr<SampleResult> sample) {
  // Finished unless a token continues it.
  const SequenceOutput out = SequenceOutput::Finished(r.id);
  if (!sample.ok()) {
    FailRequest(r, absl::InternalError(sample.status().message()));
    return out;
  }
  const int32_t token = sample->token_id;
  std::string delta;
  if (r.decoder) {
    absl::StatusOr<std::string> text = r.decoder->Add(token);
    if (!text.ok()) {
      FailRequest(r, absl::InternalError(text.status().message()));
      return out;
    }
    delta = *std::move(text);
  }
  absl::StatusOr<StopDecision> decision = r.matcher->Add(token, delta);
  if (!decision.ok()) {
    FailRequest(r, absl::InternalError(decision.status().message()));
    return out;
  }
  r.output.push_back(token);
  if (r.penalty_history) r.penalty_history->AddOutput(token);
  if (!r.first_token_time) r.first_token_time = absl::Now();

  TokenEvent event;
  event.request_id = r.id;
  event.has_token = true;
  event.token_id = token;
  event.text = std::move(decision->text);
  event.logprob = sample->logprob;
  event.top_logprobs = std::move(sample->top_logprobs);
  if (!decision->finish) {
    event.residual_trace = std::move(r.pending_trace);
    r.pending_trace.clear();
    event.logit_lens = std::move(r.pending_lens);
    r.pending_lens.clear();
    r.sink->OnEvent(event);
    return SequenceOutput::Continues(r.id, token);
  }
  // A character still incomplete at the end comes out as U+FFFD (what
  // Decode of the ids gives); text after a stop string is dropped.
  if (r.decoder && *decision->finish != FinishReason::kStopString) {
    event.text += r.decoder->Finish();
  }
  event.finish_reason = decision->finish;
  event.matched_token_id = decision->matched_token_id;
  if (decision->matched_stop_string) {
    event.matched_stop_string =
        r.params
            .stop_strings[static_cast<size_t>(*decision->matched_stop_string)];
  }
  Finish(r, std::move(event));
  return out;
}

bool Engine::Impl::Step() {
  const absl::Time step_start = absl::Now();
  absl::StatusOr<StepPlan> planned = scheduler->Schedule();
  if (!planned.ok()) {
    Fatal(planned.status());
    return false;
  }
  StepPlan& plan = *planned;
  if (!StartStep(plan)) return true;
  StepBatch batch;
  ResolveRequests(plan, step_start, &batch);
  BuildForwardOptions(plan, &batch);
  const absl::Time forward_start = absl::Now();
  const absl::StatusOr<ForwardOutput> forward = RunForward(&plan, batch);
  const absl::Duration forward_time = absl::Now() - forward_start;
  // UNAVAILABLE from the backend means it cannot run anything anymore (a
  // sticky device error): fail everything, so the process restarts.
  if (absl::IsUnavailable(forward.status())) {
    Fatal(forward.status());
    return false;
  }
  if (forward.ok()) ReadForward(plan, batch, *forward);
  EmitTokens(plan, forward, &batch);
  absl::Status updated = scheduler->Update(batch.result);
  needs_forget = true;
  if (!updated.ok()) {
    Fatal(updated);
    return false;
  }
  ReportStep(plan, absl::Now() - step_start, forward_time);
  return true;
}

bool Engine::Impl::StartStep(const StepPlan& plan) {
  num_preemptions += static_cast<int64_t>(plan.preempted_ids.size());
  // Publish what Schedule() admitted before the forward runs: the queue
  // bound (Submit) and the gauges then see the step's running and waiting
  // sequences, not the previous step's.
  Publish();
  // plan.cancelled_ids: their sinks were finished when the cancel was
  // processed.
  needs_forget = false;
  if (plan.empty()) {
    // A plan may be empty after preempting the only running sequence (the
    // next Schedule() readmits it): not a stall.
    if (!plan.preempted_ids.empty()) return false;
    if (HasWork() && !stalled) {
      LogWarning("the scheduler planned nothing with ",
                 scheduler->num_waiting(), " waiting; waiting for news");
    }
    stalled = HasWork();
    return false;
  }
  stalled = false;
  ++num_steps;
  return true;
}

void Engine::Impl::ResolveRequests(const StepPlan& plan, absl::Time step_start,
                                   StepBatch* batch) {
  const size_t n = plan.sequences.size();
  batch->requests.assign(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const ScheduledSequence& seq = plan.sequences[i];
    auto it = active.find(seq.id);
    if (it == active.end()) {  // a bug: free its resources
      LogError("scheduled sequence ", seq.id, " has no request");
      batch->result.outputs.push_back(SequenceOutput::Finished(seq.id));
      continue;
    }
    RequestState& r = *it->second;
    if (!r.first_scheduled_time) r.first_scheduled_time = step_start;
    if (seq.reset_state_slot) {
      absl::Status s = decoder->ResetStateSlot(seq.state_slot);
      if (!s.ok()) {
        FailRequest(r, absl::InternalError(s.message()));  // r is gone
        batch->result.outputs.push_back(SequenceOutput::Finished(seq.id));
        continue;
      }
    }
    batch->requests[i] = &r;
  }
}

void Engine::Impl::BuildForwardOptions(const StepPlan& plan, StepBatch* batch) {
  const size_t n = plan.sequences.size();
  ForwardOptions& options = batch->forward;
  options.residual_stats = this->options.residual_stats;
  options.logits_for_all_tokens = false;
  // The requests' interventions on the residual stream, in this step's rows.
  int64_t row = 0;
  std::vector<RequestInterventions::LensRead> reads;
  for (size_t i = 0; i < n; ++i) {
    const ScheduledSequence& seq = plan.sequences[i];
    RequestState* r = batch->requests[i];
    if (r != nullptr && r->interventions) {
      reads.clear();
      r->interventions->AddToStep(row, seq.num_tokens, seq.first_position,
                                  static_cast<int64_t>(r->prompt.size()),
                                  seq.samples_token(), &r->next_lens_position,
                                  &batch->interventions, &reads);
      for (const auto& read : reads) batch->lens_owners.push_back({r, read});
    }
    row += seq.num_tokens;
  }
  options.interventions =
      batch->interventions.empty() ? nullptr : &batch->interventions;
  // Where each row's token is chosen (device_choice.h); penalties' history
  // entries are uploaded each step from the request's distinct ids.
  options.device_choice.assign(n, false);
  std::vector<TokenChoice> token_choices(n);  // default: the argmax
  bool draws = false;
  for (size_t i = 0; i < n; ++i) {
    RequestState* r = batch->requests[i];
    DeviceChoice where = UnsampledRow();
    if (r != nullptr && plan.sequences[i].samples_token()) {
      where = ChooseWhereToSample(r->params, device_sampling, r->seed,
                                  r->output.size());
    }
    if (where.draws) {
      draws = true;
      token_choices[i] = where.choice;
      if (r->params.has_penalties()) {
        AppendHistory(*r, &token_choices[i], &options.token_history);
      }
    }
    options.device_choice[i] = where.on_device;
  }
  if (draws) options.token_choices = std::move(token_choices);
}

absl::StatusOr<ForwardOutput> Engine::Impl::RunForward(StepPlan* plan,
                                                       const StepBatch& batch) {
  absl::Status injected =
      options.fault_hook ? options.fault_hook() : absl::OkStatus();
  absl::StatusOr<ForwardOutput> forward =
      injected.ok() ? decoder->Forward(TakeBatchLayout(plan), plan->token_ids,
                                       batch.forward)
                    : absl::StatusOr<ForwardOutput>(injected);
  const size_t n = plan->sequences.size();
  // Rows not chosen on the device come back in full.
  const size_t num_logits_rows =
      std::count(batch.forward.device_choice.begin(),
                 batch.forward.device_choice.end(), false);
  if (forward.ok() &&
      (forward->logit_rows.size() != n || forward->device_ids.size() != n ||
       (!forward->device_logprobs.empty() &&
        forward->device_logprobs.size() != n) ||
       forward->logits.size() !=
           num_logits_rows * static_cast<size_t>(vocab_size))) {
    forward = absl::InternalError(
        absl::StrCat("the forward returned ", forward->logit_rows.size(),
                     " logit rows for ", n, " sequences"));
  }
  if (!forward.ok()) {
    LogError("step ", num_steps, " failed: ", forward.status().ToString());
  }
  return forward;
}

void Engine::Impl::ReadForward(const StepPlan& plan, const StepBatch& batch,
                               const ForwardOutput& forward) {
  if (!forward.residual_stats.empty()) {
    RecordResiduals(plan, batch.requests, forward);
  }
  const size_t vocab = static_cast<size_t>(vocab_size);
  if (forward.lens_logits.size() != batch.lens_owners.size() * vocab) return;
  for (size_t j = 0; j < batch.lens_owners.size(); ++j) {
    RequestState& r = *batch.lens_owners[j].first;
    const RequestInterventions::LensRead& read = batch.lens_owners[j].second;
    const absl::Span<const float> row(forward.lens_logits.data() + j * vocab,
                                      vocab);
    LensReading reading;
    reading.position = read.position;
    reading.layer = read.layer;
    reading.top =
        TopLogprobs(row, LogSumExp(row), r.interventions->lens()->top_n);
    r.pending_lens.push_back(std::move(reading));
  }
}

void Engine::Impl::EmitTokens(const StepPlan& plan,
                              const absl::StatusOr<ForwardOutput>& forward,
                              StepBatch* batch) {
  const size_t vocab = static_cast<size_t>(vocab_size);
  size_t next_logits_row = 0;  // the row of forward->logits of sequence i
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    RequestState* r = batch->requests[i];
    if (r == nullptr) continue;  // finished already; no logits row
    const ScheduledSequence& seq = plan.sequences[i];
    if (!forward.ok()) {
      FailRequest(*r, absl::InternalError(absl::StrCat(
                          "forward step failed: ", forward.status().message())));
      batch->result.outputs.push_back(SequenceOutput::Finished(seq.id));
      continue;
    }
    const bool device = batch->forward.device_choice[i];
    const size_t logits_row = next_logits_row;
    if (!device) ++next_logits_row;
    if (!seq.samples_token()) continue;
    if (device) {
      batch->result.outputs.push_back(TakeDeviceToken(
          *r, forward->device_ids[i],
          forward->device_logprobs.empty() ? nullptr
                                           : &forward->device_logprobs[i]));
      continue;
    }
    const absl::Span<const float> row(
        forward->logits.data() + logits_row * vocab, vocab);
    batch->result.outputs.push_back(Sample(*r, row));
  }
}

void Engine::Impl::ReportStep(const StepPlan& plan, absl::Duration step_time,
                              absl::Duration forward_time) {
  if (options.observer == nullptr) return;
  StepStats stats;
  stats.num_sequences = static_cast<int64_t>(plan.sequences.size());
  stats.num_tokens = plan.num_tokens();
  for (const ScheduledSequence& seq : plan.sequences) {
    if (seq.samples_token()) ++stats.num_sampled;
    const int64_t n = seq.num_tokens, cached = seq.first_position + n;
    stats.attended_keys += n * seq.first_position + n * (n + 1) / 2;
    stats.context_tokens += cached;
  }
  stats.num_preempted = static_cast<int64_t>(plan.preempted_ids.size());
  stats.num_waiting = scheduler->num_waiting();
  stats.kv_block_usage = scheduler->kv_block_usage();
  stats.state_slot_usage = scheduler->state_slot_usage();
  stats.step_seconds = Seconds(step_time);
  stats.forward_seconds = Seconds(forward_time);
  stats.outside_forward_seconds = Seconds(step_time - forward_time);
  options.observer->OnStep(stats);
}

void Engine::Impl::Run() {
  for (;;) {
    std::vector<std::unique_ptr<RequestState>> new_requests;
    std::vector<uint64_t> cancels;
    bool stop = false;
    absl::Time stop_deadline;
    bool exit_loop = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      for (;;) {
        if (!inbox_requests.empty() || !inbox_cancels.empty()) break;
        if (ShouldStep()) break;
        if (stalled) {
          // Should not happen (a sequence running alone always progresses);
          // retry now and then rather than hang.
          cv.wait_for(lock, std::chrono::milliseconds(10));
          stalled = false;
          continue;
        }
        if (stop_requested) {
          if (!HasWork()) {
            exit_loop = true;
            break;
          }
          const absl::Duration left = deadline - absl::Now();
          if (left <= absl::ZeroDuration()) break;
          // Bounded, so an infinite deadline is no special case.
          cv.wait_for(
              lock, absl::ToChronoNanoseconds(std::min(left, absl::Hours(1))));
          continue;
        }
        cv.wait(lock);
      }
      // Keep counting the drained requests against the admission bound
      // until the next Publish().
      published_admitted += static_cast<int64_t>(inbox_requests.size());
      new_requests.swap(inbox_requests);
      cancels.swap(inbox_cancels);
      stop = stop_requested;
      stop_deadline = deadline;
    }
    if (exit_loop) break;

    for (auto& r : new_requests) {
      const uint64_t id = r->id;
      pending.push_back(id);
      active[id] = std::move(r);
    }
    for (uint64_t id : cancels) CancelRequest(id);
    if (stop && absl::Now() >= stop_deadline) {
      // UNAVAILABLE, not CANCELLED: the engine cut the work, not its
      // client, and a retry elsewhere may succeed.
      CancelAll(absl::UnavailableError(
          "the engine is draining: its shutdown deadline passed before the "
          "request finished"));
    }
    AddPending();
    // Publish the new work before the step runs, so that a watcher (the
    // liveness check) knows work is pending even if the step hangs.
    if (!new_requests.empty()) Publish();
    bool ok = true;
    // With no work, an empty Schedule() still forgets finished sequences.
    if (ShouldStep()) ok = Step();
    // A step may have freed room in the scheduler's queue.
    if (ok) AddPending();
    Publish();
    if (!ok) break;
  }
  Publish();
}

}  // namespace tributary

// The engine thread's residual telemetry (design.md §4): every step's
// summary for the observer, and each request's trace and summary when it
// asked for them.
#include <algorithm>
#include <vector>

#include "engine/runtime/engine_impl.h"

namespace tributary {

using engine_internal::RequestState;

void Engine::Impl::RecordResiduals(const StepPlan& plan,
                                   const std::vector<RequestState*>& requests,
                                   const ForwardOutput& forward) {
  const int64_t num_tokens = plan.num_tokens();
  const absl::Span<const float> stats(forward.residual_stats);
  const absl::Span<const float> finals(forward.final_stream_norm);
  if (options.observer != nullptr) {
    // The model's health: the rows of the requests that leave the stream
    // as the model makes it.
    step_residuals.Clear();
    int64_t num_intervened = 0;
    int64_t row = 0;
    for (size_t i = 0; i < plan.sequences.size(); ++i) {
      const int64_t n = plan.sequences[i].num_tokens;
      const RequestState* r = requests[i];
      if (r != nullptr && r->interventions && r->interventions->changes_stream()) {
        num_intervened += n;
      } else {
        step_residuals.AddStep(stats, finals, num_tokens, row, row + n);
      }
      row += n;
    }
    options.observer->OnResidualStats(step_residuals, num_intervened);
  }
  const size_t num_sublayers = step_residuals.sublayers.size();
  int64_t offset = 0;  // the sequence's first row in the step
  for (size_t i = 0; i < plan.sequences.size(); ++i) {
    const ScheduledSequence& seq = plan.sequences[i];
    RequestState* r = requests[i];
    const int64_t begin = offset;
    offset += seq.num_tokens;
    if (r == nullptr ||
        (!r->want_residual_trace && !r->residual_summary.has_value())) {
      continue;
    }
    // Rows of positions recorded before a preemption are skipped.
    const int64_t skip = std::clamp<int64_t>(
        r->next_residual_position - seq.first_position, 0, seq.num_tokens);
    const int64_t first = begin + skip;
    if (first >= offset) continue;
    r->next_residual_position = seq.first_position + seq.num_tokens;
    if (r->residual_summary) {
      r->residual_summary->AddStep(stats, finals, num_tokens, first, offset);
    }
    if (!r->want_residual_trace) continue;
    for (int64_t t = first; t < offset; ++t) {
      ResidualTraceToken token;
      token.position = seq.first_position + (t - begin);
      token.norms.resize(3 * num_sublayers);
      for (size_t s = 0; s < num_sublayers; ++s) {
        const size_t row = (s * static_cast<size_t>(num_tokens) +
                            static_cast<size_t>(t)) *
                           kResidualStatsColumns;
        token.norms[3 * s + 0] = stats[row + kStatStreamNorm];
        token.norms[3 * s + 1] = stats[row + kStatUpdateNorm];
        token.norms[3 * s + 2] = stats[row + kStatSumNorm];
      }
      r->pending_trace.push_back(std::move(token));
    }
  }
}

}  // namespace tributary

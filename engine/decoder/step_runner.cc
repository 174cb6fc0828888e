#include "engine/decoder/step_runner.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tributary {

StepDims StepDims::ForModel(const ModelConfig& c) {
  StepDims dims;
  dims.hidden = c.hidden_size;
  dims.widest = std::max(c.hidden_size, c.intermediate_size);
  if (c.num_full_attention_layers() > 0) {
    dims.widest = std::max({dims.widest, c.q_proj_rows(), c.kv_proj_rows()});
  }
  if (c.num_linear_attention_layers() > 0) {
    dims.widest =
        std::max({dims.widest, c.linear_conv_dim(), c.linear_value_dim()});
    dims.num_gate_heads = c.linear_num_value_heads;
  }
  dims.num_sublayers = 2 * c.num_hidden_layers;
  dims.vocab = c.vocab_size;
  return dims;
}

absl::Status ValidateTokenChoices(const ForwardOptions& options,
                                  int64_t num_rows, int64_t vocab_size) {
  if (!options.device_choice.empty() &&
      static_cast<int64_t>(options.device_choice.size()) != num_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_choice has ", options.device_choice.size(),
                     " flags for ", num_rows, " logit rows"));
  }
  if (!options.token_choices.empty() &&
      static_cast<int64_t>(options.token_choices.size()) != num_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("token_choices has ", options.token_choices.size(),
                     " entries for ", num_rows, " logit rows"));
  }
  const int64_t num_history =
      static_cast<int64_t>(options.token_history.size());
  // A row's entries are its own: a backend writes its scratch into them
  // (TokenHistoryEntry::raw_logit), and on a GPU (or in the parts of a
  // step) two rows sharing an entry would race on it.
  std::vector<std::pair<int64_t, size_t>> ranges;  // (begin, row)
  for (size_t r = 0; r < options.token_choices.size(); ++r) {
    const TokenChoice& choice = options.token_choices[r];
    if (choice.history_begin < 0 || choice.history_count < 0 ||
        int64_t{choice.history_begin} + choice.history_count > num_history) {
      return absl::InvalidArgumentError(
          absl::StrCat("token_choices[", r, "]: history entries [",
                       choice.history_begin, ", +", choice.history_count,
                       ") outside the ", num_history, " given"));
    }
    if (choice.history_count > 0) ranges.emplace_back(choice.history_begin, r);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    const TokenChoice& before = options.token_choices[ranges[i - 1].second];
    if (ranges[i].first <
        int64_t{before.history_begin} + before.history_count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token_choices[", ranges[i].second, "]: history entries from ",
          ranges[i].first, " overlap those of token_choices[",
          ranges[i - 1].second, "]; each row's entries must be its own"));
    }
  }
  for (size_t e = 0; e < options.token_history.size(); ++e) {
    const int32_t id = options.token_history[e].token_id;
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token_history[", e, "]: token id ", id,
                       " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

StepRunner::StepRunner(Backend* backend, const StepDims& dims)
    : backend_(backend), dims_(dims), buffers_(backend) {}

absl::StatusOr<ForwardOutput> StepRunner::Run(const BatchLayout& layout,
                                              absl::Span<const int32_t> ids,
                                              const ForwardOptions& options,
                                              RunModel model) {
  const StepInterventions* iv =
      options.interventions != nullptr && !options.interventions->empty()
          ? options.interventions
          : nullptr;
  // The step in parts (Backend::StepParts): contiguous runs of sequences of
  // about equal token counts, part p's sequences [part_begin[p],
  // part_begin[p + 1]). Interventions address rows of the whole step and
  // copy to and from the host mid-step: those steps run in one piece.
  const int64_t num_sequences = static_cast<int64_t>(layout.sequences.size());
  const int num_parts =
      iv == nullptr ? static_cast<int>(std::clamp<int64_t>(
                          backend_->StepParts(layout), 1, num_sequences))
                    : 1;
  const std::vector<int64_t> part_begin = layout.PartBegins(num_parts);
  LogitRows rows =
      ChooseLogitRows(layout, part_begin, options.logits_for_all_tokens);
  const int64_t num_rows = static_cast<int64_t>(rows.step_rows.size());
  RETURN_IF_ERROR(ValidateTokenChoices(options, num_rows, dims_.vocab));

  StepActivations step;
  StepIo io;
  buffers_.Reset();
  RETURN_IF_ERROR(TakeBuffers(static_cast<int64_t>(ids.size()), num_rows,
                              options, &step, &io));
  RETURN_IF_ERROR(Upload(ids, rows, options, io));

  ForwardOutput output;
  // The whole step's layout, for the parts' backends' owner too: nothing
  // it runs after the parts may see an earlier step's.
  RETURN_IF_ERROR(backend_->SetBatchLayout(layout));
  if (num_parts == 1) {
    // A decode step without interventions is the same work at every step of
    // its batch size (and context bucket): one graph region, which a backend
    // with graphs replays (backend.h). Interventions copy to and from the
    // host mid-step, and prefill shapes vary: those run as plain ops.
    bool graph_region = iv == nullptr;
    for (const SequenceSlice& s : layout.sequences) {
      if (s.num_tokens != 1 || s.first_position == 0) graph_region = false;
    }
    if (graph_region) backend_->BeginGraphRegion();
    RETURN_IF_ERROR(model(step, io, iv, &output));
    if (graph_region) RETURN_IF_ERROR(backend_->EndGraphRegion());
  } else {
    RETURN_IF_ERROR(RunParts(layout, part_begin, rows, step, io, model));
  }
  output.logit_rows = std::move(rows.step_rows);
  RETURN_IF_ERROR(CopyBack(options, step, io, &output));
  return output;
}

StepRunner::LogitRows StepRunner::ChooseLogitRows(
    const BatchLayout& layout, const std::vector<int64_t>& part_begin,
    bool all_tokens) {
  LogitRows rows;
  const size_t num_parts = part_begin.size() - 1;
  for (size_t p = 0; p < num_parts; ++p) {
    rows.part_first.push_back(static_cast<int64_t>(rows.step_rows.size()));
    const int64_t first_row = layout.sequences[part_begin[p]].token_offset;
    for (int64_t i = part_begin[p]; i < part_begin[p + 1]; ++i) {
      const SequenceSlice& s = layout.sequences[i];
      const int64_t end = s.token_offset + s.num_tokens;
      for (int64_t t = all_tokens ? s.token_offset : end - 1; t < end; ++t) {
        rows.step_rows.push_back(t);
        rows.part_rows.push_back(static_cast<int32_t>(t - first_row));
      }
    }
  }
  rows.part_first.push_back(static_cast<int64_t>(rows.step_rows.size()));
  return rows;
}

absl::Status StepRunner::TakeBuffers(int64_t num_tokens, int64_t num_rows,
                                     const ForwardOptions& options,
                                     StepActivations* step, StepIo* io) {
  const ElementType act = backend_->activation_type();
  const ElementType f32 = ElementType::kF32, i32 = ElementType::kI32;
  step->backend = backend_;
  step->num_tokens = num_tokens;
  for (Tensor* t : {&step->stream, &step->normed, &step->update}) {
    ASSIGN_OR_RETURN(*t, buffers_.Take(act, Shape{num_tokens, dims_.hidden}));
  }
  for (Tensor& t : step->scratch) {
    ASSIGN_OR_RETURN(t, buffers_.Take(act, Shape{num_tokens, dims_.widest}));
  }
  if (dims_.num_gate_heads > 0) {
    ASSIGN_OR_RETURN(
        step->gates,
        buffers_.Take(f32, Shape{2 * num_tokens, dims_.num_gate_heads}));
  }
  if (options.residual_stats) {
    ASSIGN_OR_RETURN(step->stats,
                     buffers_.Take(f32, Shape{dims_.num_sublayers, num_tokens,
                                              kResidualStatsColumns}));
  }
  ASSIGN_OR_RETURN(io->ids, buffers_.Take(i32, Shape{num_tokens}));
  ASSIGN_OR_RETURN(io->rows, buffers_.Take(i32, Shape{num_rows}));
  ASSIGN_OR_RETURN(io->logits,
                   buffers_.Take(f32, Shape{num_rows, dims_.vocab}));
  io->device_choice = !options.device_choice.empty();
  io->draws = io->device_choice && !options.token_choices.empty();
  if (!io->device_choice) return absl::OkStatus();
  ASSIGN_OR_RETURN(io->ids_chosen, buffers_.Take(i32, Shape{num_rows}));
  // Taken whether or not this step draws, so that the buffers after them
  // keep their places from step to step (and graphs their arguments).
  ASSIGN_OR_RETURN(io->choices,
                   buffers_.Take(i32, Shape{num_rows, kTokenChoiceWords}));
  ASSIGN_OR_RETURN(io->logprobs,
                   buffers_.Take(i32, Shape{num_rows, kTokenLogprobsWords}));
  const int64_t num_history =
      static_cast<int64_t>(options.token_history.size());
  ASSIGN_OR_RETURN(io->history,
                   buffers_.Take(i32, Shape{std::max<int64_t>(num_history, 1),
                                            kTokenHistoryWords}));
  return absl::OkStatus();
}

absl::Status StepRunner::Upload(absl::Span<const int32_t> ids,
                                const LogitRows& rows,
                                const ForwardOptions& options,
                                const StepIo& io) {
  // Before the step's ops, so that a graph region holds no copy.
  RETURN_IF_ERROR(backend_->CopyFromHost(ids.data(), io.ids));
  RETURN_IF_ERROR(backend_->CopyFromHost(rows.part_rows.data(), io.rows));
  if (!io.draws) return absl::OkStatus();
  const int64_t num_history =
      static_cast<int64_t>(options.token_history.size());
  if (num_history > 0) {
    RETURN_IF_ERROR(backend_->CopyFromHost(
        options.token_history.data(),
        AsShape(io.history, Shape{num_history, kTokenHistoryWords})));
  }
  return backend_->CopyFromHost(options.token_choices.data(), io.choices);
}

absl::Status StepRunner::RunParts(const BatchLayout& layout,
                                  const std::vector<int64_t>& part_begin,
                                  const LogitRows& rows,
                                  const StepActivations& step, const StepIo& io,
                                  RunModel model) {
  // Each part: its sequences' layout from row 0, its rows of every buffer
  // (a buffer of [T, w] for some w holds [n, w] from row r at r · w), its
  // logit rows.
  const int num_parts = static_cast<int>(part_begin.size()) - 1;
  std::vector<BatchLayout> part_layouts(static_cast<size_t>(num_parts));
  for (int p = 0; p < num_parts; ++p) {
    const int64_t first_row = layout.sequences[part_begin[p]].token_offset;
    for (int64_t i = part_begin[p]; i < part_begin[p + 1]; ++i) {
      SequenceSlice s = layout.sequences[i];
      s.token_offset -= first_row;
      part_layouts[p].sequences.push_back(std::move(s));
    }
  }
  return backend_->RunInParts(
      num_parts, [&](int p, Backend& part_backend) -> absl::Status {
        const BatchLayout& part_layout = part_layouts[p];
        RETURN_IF_ERROR(part_backend.SetBatchLayout(part_layout));
        const int64_t r = layout.sequences[part_begin[p]].token_offset;
        const int64_t n = part_layout.num_tokens();
        auto rows_of = [&](const Tensor& t) {
          return t.data == nullptr ? t : RowsOf(t, r, n);
        };
        StepActivations part;
        part.backend = &part_backend;
        part.num_tokens = n;
        part.first_row = r;
        part.stream = rows_of(step.stream);
        part.normed = rows_of(step.normed);
        part.update = rows_of(step.update);
        for (int k = 0; k < kNumStepScratch; ++k) {
          part.scratch[k] = rows_of(step.scratch[k]);
        }
        // gates [2T, Hv] as g then beta: the part's g and beta side by side
        // in its 2n rows.
        if (step.gates.data != nullptr) {
          part.gates = RowsOf(step.gates, 2 * r, 2 * n);
        }
        part.stats = step.stats;
        const int64_t lr = rows.part_first[p];
        const int64_t ln = rows.part_first[p + 1] - lr;
        auto logit_rows_of = [&](const Tensor& t) {
          return t.data == nullptr ? t : RowsOf(t, lr, ln);
        };
        StepIo part_io = io;
        part_io.ids = RowsOf(io.ids, r, n);
        part_io.rows = RowsOf(io.rows, lr, ln);
        part_io.logits = RowsOf(io.logits, lr, ln);
        part_io.ids_chosen = logit_rows_of(io.ids_chosen);
        part_io.choices = logit_rows_of(io.choices);
        part_io.logprobs = logit_rows_of(io.logprobs);
        return model(part, part_io, nullptr, nullptr);
      });
}

absl::Status StepRunner::CopyBack(const ForwardOptions& options,
                                  const StepActivations& step, const StepIo& io,
                                  ForwardOutput* output) {
  const int64_t num_rows = io.rows.num_elements();
  const int64_t vocab = dims_.vocab;
  if (!io.device_choice) {
    output->logits.resize(static_cast<size_t>(num_rows * vocab));
    RETURN_IF_ERROR(backend_->CopyToHost(io.logits, output->logits.data()));
  } else {
    output->device_ids.resize(static_cast<size_t>(num_rows));
    RETURN_IF_ERROR(
        backend_->CopyToHost(io.ids_chosen, output->device_ids.data()));
    bool with_logprobs = false;
    for (const TokenChoice& choice : options.token_choices) {
      with_logprobs = with_logprobs || choice.num_logprobs >= 0;
    }
    if (with_logprobs) {
      output->device_logprobs.resize(static_cast<size_t>(num_rows));
      RETURN_IF_ERROR(
          backend_->CopyToHost(io.logprobs, output->device_logprobs.data()));
    }
    // Only the rows the host samples from come back in full.
    const int64_t kept = std::count(options.device_choice.begin(),
                                    options.device_choice.end(), false);
    output->logits.resize(static_cast<size_t>(kept * vocab));
    int64_t at = 0;
    for (int64_t r = 0; r < num_rows; ++r) {
      if (options.device_choice[r]) continue;
      RETURN_IF_ERROR(backend_->CopyToHost(RowsOf(io.logits, r, 1),
                                           output->logits.data() + at * vocab));
      ++at;
    }
  }
  if (options.residual_stats) {
    const int64_t num_tokens = step.num_tokens;
    const int64_t columns = kResidualStatsColumns;
    output->residual_stats.resize(
        static_cast<size_t>(dims_.num_sublayers * num_tokens * columns));
    RETURN_IF_ERROR(
        backend_->CopyToHost(step.stats, output->residual_stats.data()));
    // The stream entering the final norm is the last sublayer's sum.
    output->final_stream_norm.resize(static_cast<size_t>(num_tokens));
    const float* last = output->residual_stats.data() +
                        (dims_.num_sublayers - 1) * num_tokens * columns;
    for (int64_t t = 0; t < num_tokens; ++t) {
      output->final_stream_norm[t] = last[t * columns + kStatSumNorm];
    }
  }
  return backend_->Synchronize();
}

}  // namespace tributary

// The machinery that runs one forward step of the decoder on a backend, as
// distinct from the model (which ops a step runs: HybridDecoder). For each
// step the runner
//   - takes the step's buffers from a BufferArena (the same places every
//     step of a shape, so a steady stream of steps allocates nothing),
//   - chooses the rows that get logits and uploads the token ids, those
//     rows and the device choices (ForwardOptions) before any op,
//   - runs the model once in one piece (a decode step without
//     interventions inside a graph region) or once per part
//     (Backend::RunInParts), handing each part its rows of every buffer,
//   - copies back the logits, or the tokens the backend chose, their
//     logprobs, and the residual statistics.
//
// Thread safety: one thread at a time (the engine thread); the parts of a
// step run on the backend's threads, each on its own rows.
#ifndef TRIBUTARY_ENGINE_DECODER_STEP_RUNNER_H_
#define TRIBUTARY_ENGINE_DECODER_STEP_RUNNER_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/backend/backend.h"
#include "engine/backend/batch_layout.h"
#include "engine/backend/tensor.h"
#include "engine/decoder/buffer_arena.h"
#include "engine/decoder/forward_options.h"
#include "engine/model/model_config.h"
#include "engine/decoder/stream_interventions.h"

namespace tributary {

// How many [T, widest] scratch buffers a step has: the most any sublayer
// keeps at once (linear attention's projections, conv output, gate inputs,
// split keys and values, and the core's output).
inline constexpr int kNumStepScratch = 8;

// The activations of a step, or of one part of a step: a part's buffers
// are its rows of the whole step's.
struct StepActivations {
  // The backend the ops run on: the runner's, or a part's.
  Backend* backend = nullptr;
  int64_t num_tokens = 0;  // T
  // This part's first row in the whole step (0 for a step in one piece).
  int64_t first_row = 0;
  Tensor stream, normed, update;  // [T, hidden]
  Tensor stats;  // the whole step's [2L, T_step, columns], or empty
  // Scratch shared by the sublayers, each [T, widest activation]; each
  // sublayer names what it keeps where (hybrid_decoder.cc).
  std::array<Tensor, kNumStepScratch> scratch;
  // The GDN gates g then beta, [2T, Hv] (a part's: [2n, Hv], its beta from
  // row n), f32 whatever the activation type: the log decay compounds over
  // every token, so it is kept at full precision (transformers computes it
  // in f32 too). Empty without GDN layers.
  Tensor gates;
};

// What a step (or a part) reads and writes besides its activations: the
// token ids [T], and for its logit rows (rows of the step or part, in
// order) their indexes [R] into its stream, the logits [R, vocab], and with
// device choices the chosen ids [R], the choices [R, words], the logprobs
// [R, words] and the whole step's history entries.
struct StepIo {
  Tensor ids, rows, logits;
  Tensor ids_chosen, choices, logprobs, history;
  bool device_choice = false;  // ArgMaxRows, or ChooseTokens with draws
  bool draws = false;
};

// The sizes of a step's buffers, from the model.
struct StepDims {
  int64_t hidden = 0;
  // The widest per-token activation of any sublayer.
  int64_t widest = 0;
  // GDN value heads (the gates' width); 0 without GDN layers.
  int64_t num_gate_heads = 0;
  int64_t num_sublayers = 0;  // 2 · layers
  int64_t vocab = 0;

  static StepDims ForModel(const ModelConfig& config);
};

class StepRunner {
 public:
  // The model's forward of one step or part on its buffers: the embedding,
  // every layer, and the logits (or device choices) of io's rows. `iv` and
  // `output` (for interventions' readings) only for a step in one piece;
  // null for a part.
  using RunModel = absl::FunctionRef<absl::Status(
      StepActivations& step, const StepIo& io, const StepInterventions* iv,
      ForwardOutput* output)>;

  // `backend` must outlive the runner.
  StepRunner(Backend* backend, const StepDims& dims);

  // Runs `model` on one step whose layout and ids the caller has checked
  // (HybridDecoder::CheckLayout). Checks `options` against the step's
  // logit rows first; on such an error nothing has run.
  absl::StatusOr<ForwardOutput> Run(const BatchLayout& layout,
                                    absl::Span<const int32_t> ids,
                                    const ForwardOptions& options,
                                    RunModel model);

 private:
  // Which rows get logits: their indexes into the step (output order) and
  // into their part, and where each part's logit rows begin
  // ([num_parts + 1]).
  struct LogitRows {
    std::vector<int64_t> step_rows;
    std::vector<int32_t> part_rows;
    std::vector<int64_t> part_first;
  };
  static LogitRows ChooseLogitRows(const BatchLayout& layout,
                                   const std::vector<int64_t>& part_begin,
                                   bool all_tokens);
  // The step's buffers, in the same order every step (BufferArena).
  absl::Status TakeBuffers(int64_t num_tokens, int64_t num_rows,
                           const ForwardOptions& options, StepActivations* step,
                           StepIo* io);
  // The ids, the logit rows and the device choices onto the backend.
  absl::Status Upload(absl::Span<const int32_t> ids, const LogitRows& rows,
                      const ForwardOptions& options, const StepIo& io);
  // The step as `num_parts` parts on the backend's threads.
  absl::Status RunParts(const BatchLayout& layout,
                        const std::vector<int64_t>& part_begin,
                        const LogitRows& rows, const StepActivations& step,
                        const StepIo& io, RunModel model);
  // Logits or device choices, logprobs and residual statistics to the host.
  absl::Status CopyBack(const ForwardOptions& options,
                        const StepActivations& step, const StepIo& io,
                        ForwardOutput* output);

  Backend* backend_;
  StepDims dims_;
  BufferArena buffers_;
};

// Checks device_choice, token_choices and token_history against a step of
// `num_rows` logit rows and a vocabulary of `vocab_size` ids.
absl::Status ValidateTokenChoices(const ForwardOptions& options,
                                  int64_t num_rows, int64_t vocab_size);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_DECODER_STEP_RUNNER_H_

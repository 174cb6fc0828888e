// Internal to HybridDecoder: one step's activations, shared by the forward
// (hybrid_decoder.cc) and the stream interventions
// (hybrid_decoder_interventions.cc). Not part of the API.
#ifndef TRIBUTARY_ENGINE_MODEL_HYBRID_DECODER_STEP_H_
#define TRIBUTARY_ENGINE_MODEL_HYBRID_DECODER_STEP_H_

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/backend/tensor.h"
#include "engine/model/hybrid_decoder.h"

namespace tributary {

// The activations of a step, or of one part of a step (Backend::RunInParts):
// a part's buffers are its rows of the whole step's.
struct HybridDecoder::Step {
  // The backend the ops run on: the decoder's, or a part's.
  Backend* backend = nullptr;
  int64_t num_tokens = 0;
  // This part's first row in the whole step (0 for a step in one piece).
  int64_t first_row = 0;
  Tensor stream, normed, update;
  Tensor stats;  // the whole step's [2L, T, columns], or empty
  // Scratch shared by the layers (sized for the largest use).
  Tensor wide_a, wide_b, wide_c;  // [T, max projection width]
  Tensor small_a, small_b, small_c, small_d, small_e;
  // The GDN gates g then beta, [2T, Hv] (a part's: [2n, Hv], its beta from
  // row n), f32 whatever the activation type: the
  // log decay compounds over every token, so it is kept at full precision
  // (transformers computes it in f32 too). Empty without GDN layers.
  Tensor gates;
  // Interventions: the next intervention_workspace_ buffer to use, and the
  // host vectors already uploaded this step.
  size_t next_intervention_buffer = 0;
  std::unordered_map<const std::vector<float>*, Tensor> uploaded;
};

// What a step (or a part) reads and writes besides its activations: the
// token ids [T], and for its logit rows (rows of the step or part, in
// order) their indexes [R] into its stream, the logits [R, vocab], and with
// device choices the chosen ids [R], the choices [R, words], the logprobs
// [R, words] and the whole step's history entries.
struct HybridDecoder::StepIo {
  Tensor ids, rows, logits;
  Tensor ids_chosen, choices, logprobs, history;
  bool device_choice = false;  // ArgMaxRows, or ChooseTokens with draws
  bool draws = false;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_HYBRID_DECODER_STEP_H_

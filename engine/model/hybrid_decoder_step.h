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

struct HybridDecoder::Step {
  int64_t num_tokens = 0;
  Tensor stream, normed, update;
  Tensor stats;  // [2L, T, columns] or empty
  // Scratch shared by the layers (sized for the largest use).
  Tensor wide_a, wide_b, wide_c;  // [T, max projection width]
  Tensor small_a, small_b, small_c, small_d, small_e;
  // The GDN gates g and beta [2T, Hv], f32 whatever the activation type: the
  // log decay compounds over every token, so it is kept at full precision
  // (transformers computes it in f32 too). Empty without GDN layers.
  Tensor gates;
  // Interventions: the next intervention_workspace_ buffer to use, and the
  // host vectors already uploaded this step.
  size_t next_intervention_buffer = 0;
  std::unordered_map<const std::vector<float>*, Tensor> uploaded;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_HYBRID_DECODER_STEP_H_

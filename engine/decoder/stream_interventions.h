// Interventions on the residual stream for one step of HybridDecoder::
// Forward, in rows of the step (the engine maps each request's interventions
// to its rows). Every sublayer only adds to the stream, so the cheapest
// intervention is to add a direction to it, and the cheapest readout is to
// look at it:
//
//   point "after sublayer s" (s = 2 · layer + 0 for the mixer, 1 for the
//   ffn) is right after that sublayer's residual add; at each point, in
//   this order:
//     1. skips:    rows whose update of sublayer s is not added (zeroed
//                  before the add; the residual statistics then show 0);
//     2. steering: rows += scale · vector;
//     3. ablation: rows ← rows − (rows · û) û, at every point and also
//                  after the embedding;
//     4. lens:     after layer l's ffn (s = 2l + 1), rows read through the
//                  final norm and lm_head: the logits the stream at that
//                  depth would give (the engine ranks them);
//     5. captures: rows copied out as they are.
// The model code applies them through Backend ops, so every backend gets
// them. A step without interventions runs none of this.
#ifndef TRIBUTARY_ENGINE_DECODER_STREAM_INTERVENTIONS_H_
#define TRIBUTARY_ENGINE_DECODER_STREAM_INTERVENTIONS_H_

#include <cstdint>
#include <vector>

namespace tributary {

struct StepInterventions {
  struct Skip {
    int32_t sublayer = 0;
    int64_t row_begin = 0, row_end = 0;
  };
  struct Steer {
    int32_t sublayer = 0;
    int64_t row_begin = 0, row_end = 0;
    const std::vector<float>* vector = nullptr;  // [hidden]; not owned
    float scale = 1.0f;
  };
  struct Ablate {
    int64_t row_begin = 0, row_end = 0;
    const std::vector<float>* unit = nullptr;  // [hidden], unit norm
  };
  struct LensRead {
    int32_t layer = 0;  // the stream after this layer's ffn
    int64_t row = 0;
  };
  std::vector<Skip> skips;
  std::vector<Steer> steers;
  std::vector<Ablate> ablations;
  // The stream row itself after sublayer s (after the interventions
  // there), copied to the host in f32: what tributary-direction averages.
  struct Capture {
    int32_t sublayer = 0;
    int64_t row = 0;
  };
  std::vector<LensRead> lens;
  std::vector<Capture> captures;

  bool empty() const {
    return skips.empty() && steers.empty() && ablations.empty() &&
           lens.empty() && captures.empty();
  }
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_DECODER_STREAM_INTERVENTIONS_H_

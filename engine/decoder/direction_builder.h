// Directions in the residual stream, made from examples: the mean stream
// at one point (after a layer's mixer or ffn) over a set of prompts, so
// that mean(A) − mean(B) is a steering or ablation direction
// (tributary-direction writes it; the server loads it by name).
#ifndef TRIBUTARY_ENGINE_DECODER_DIRECTION_BUILDER_H_
#define TRIBUTARY_ENGINE_DECODER_DIRECTION_BUILDER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/decoder/hybrid_decoder.h"

namespace tributary {

struct StreamPoint {
  int32_t layer = 0;
  bool after_ffn = true;  // else after the mixer
};

// The mean over `prompts` (token ids) of the stream at `point`: of every
// token (all_tokens) or of each prompt's last token. Each prompt runs as a
// fresh prefill in state slot 0 and KV blocks 0, 1, … of `decoder`, which
// must have room for the longest prompt (else INVALID_ARGUMENT naming the
// prompt). f64 accumulation.
absl::StatusOr<std::vector<float>> MeanStream(
    HybridDecoder& decoder, const std::vector<std::vector<int32_t>>& prompts,
    StreamPoint point, bool all_tokens);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_DECODER_DIRECTION_BUILDER_H_

// The readable reference of the whole hybrid decoder (model-spec.md §2–§5):
// one sequence at a time, dense caches, f32 throughout, built only from the
// reference ops of engine/backend/cpu/reference_ops.h.
//
// It is the oracle that the engine's batched, paged and fast paths (and the
// CUDA backend through them) are tested against, and it is what the
// reference fixtures of Hugging Face transformers check first. It is not a
// serving path: it is slow and holds one sequence.
//
// Like transformers, a call with one new token after a prefill takes the
// recurrent form of the delta rule; every other call takes the chunked form.
#ifndef TRIBUTARY_ENGINE_DECODER_REFERENCE_DECODER_H_
#define TRIBUTARY_ENGINE_DECODER_REFERENCE_DECODER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace tributary {

// The per-token residual statistics of one sublayer (design.md §4).
struct SublayerTrace {
  int64_t layer = 0;
  bool is_ffn = false;  // false: the mixer
  std::vector<reference::ResidualTokenStats> tokens;
};

struct ReferenceStepResult {
  // [num_tokens, vocab_size], raw f32 logits of every new token.
  std::vector<float> logits;
  // Two entries per layer (mixer, ffn), in order.
  std::vector<SublayerTrace> residual;
  // ‖x‖ of the stream entering the final norm, per new token.
  std::vector<float> final_stream_norm;
};

class ReferenceDecoder {
 public:
  // `config` and `weights` must outlive the decoder. `max_tokens` bounds the
  // sequence length (the dense KV cache is allocated up front).
  static absl::StatusOr<ReferenceDecoder> Create(const ModelConfig& config,
                                                 const ModelWeights& weights,
                                                 int64_t max_tokens);

  // Runs the next `ids` of the sequence (a prefill, a prefill chunk or one
  // decode token) and returns their logits and residual statistics. Errors:
  // an empty call, an id out of the vocabulary, or the sequence growing past
  // max_tokens (INVALID_ARGUMENT / OUT_OF_RANGE); the caches are unchanged
  // then.
  absl::StatusOr<ReferenceStepResult> Forward(absl::Span<const int32_t> ids);

  // Number of tokens processed so far.
  int64_t num_tokens() const { return num_tokens_; }

 private:
  struct LayerCache {
    std::vector<float> conv_window;  // GDN: [kernel - 1, conv_dim]
    std::vector<float> state;        // GDN: [Hv, dk, dv]
    std::vector<float> k;            // attention: [max_tokens, Hkv, head_dim]
    std::vector<float> v;
  };

  ReferenceDecoder(const ModelConfig& config, const ModelWeights& weights,
                   int64_t max_tokens);

  // x̃ [T, hidden] → mixer update [T, hidden].
  void GatedDeltaNet(int64_t layer, const std::vector<float>& normed,
                     int64_t num_tokens, bool use_recurrent,
                     std::vector<float>* update);
  void GatedAttention(int64_t layer, const std::vector<float>& normed,
                      int64_t num_tokens, std::vector<float>* update);
  void Mlp(int64_t layer, const std::vector<float>& normed, int64_t num_tokens,
           std::vector<float>* update);

  const ModelConfig* config_;
  const ModelWeights* weights_;
  int64_t max_tokens_;
  int64_t num_tokens_ = 0;
  std::vector<LayerCache> caches_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_DECODER_REFERENCE_DECODER_H_

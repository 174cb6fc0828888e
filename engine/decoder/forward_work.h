// The least a forward step of the hybrid decoder must do, counted from the
// model: the FLOPs of its products, attention and delta rule, and the bytes
// it must move (weights, GDN state, KV cache). These are the numerators of
// design.md §8's rooflines: a benchmark divides a step's work by ceilings
// measured in the same run (a FLOP rate, a read rate) to get the least time
// the step could take on that machine, whatever the kernels.
#ifndef TRIBUTARY_ENGINE_DECODER_FORWARD_WORK_H_
#define TRIBUTARY_ENGINE_DECODER_FORWARD_WORK_H_

#include <cstdint>

#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace tributary {

// What one step holds (the engine's StepStats carry the same counts).
struct StepShape {
  int64_t sequences = 0;   // in the batch
  int64_t tokens = 0;      // new tokens
  int64_t logit_rows = 0;  // tokens whose logits are computed (those sampled)
  // Query-key pairs the attention layers score: Σ over new tokens of the
  // keys each attends to (its position + 1).
  int64_t attended_keys = 0;
  // Σ over sequences of the tokens cached after the step (its KV read).
  int64_t context_tokens = 0;
};

struct ForwardWork {
  // Matrix parameters every token multiplies by: the layers' projections
  // (not the embedding table, which a token gathers a row of, nor lm_head).
  int64_t layer_matrix_params = 0;
  // lm_head's parameters [vocab × hidden]: a logits row multiplies by them.
  int64_t lm_head_params = 0;
  // Bytes of weights a step reads whatever its batch, as the checkpoint
  // stores them: every tensor but the embedding table (a tied lm_head once).
  int64_t weight_bytes = 0;
  // GDN state of one sequence in every GDN layer (the conv window of
  // kernel − 1 inputs in the activation type, the recurrent state in f32):
  // a step reads and writes it once for every sequence it holds. Also the
  // engine's state slot size.
  int64_t state_bytes_per_sequence = 0;
  // K and V of one token in every attention layer, in the activation type:
  // a step reads a sequence's whole context once. Also the KV cache's
  // bytes per token.
  int64_t kv_bytes_per_token = 0;
  // The delta rule's FLOPs per token, every GDN layer: model-spec §4.5's
  // five steps are 7 flops per state element (decay 1, Sᵀk 2, the rank-1
  // update 2, Sᵀq 2).
  int64_t delta_rule_flops_per_token = 0;
  // FLOPs per query-key pair, every attention layer and head: q·k and the
  // weighted sum of v, 2 · head_dim each.
  int64_t attention_flops_per_key = 0;

  // 2 · (layer params · tokens + lm_head params · logit rows) + the delta
  // rule's + attention's; norms, conv, gates and sampling are left out
  // (each is O(hidden) per token, under 1 % of a token's products).
  double Flops(const StepShape& step) const;
  // Weights once, the GDN state read and written for every sequence, every
  // sequence's KV context read once (the step's new K and V writes and the
  // activations are left out).
  double Bytes(const StepShape& step) const;
};

// `activation_bytes`: the backend's activation element size (the KV cache
// and conv windows are stored in it).
ForwardWork ForwardWorkOf(const ModelConfig& config,
                          const ModelWeights& weights,
                          int64_t activation_bytes);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_DECODER_FORWARD_WORK_H_

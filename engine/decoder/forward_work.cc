#include "engine/decoder/forward_work.h"

#include <vector>

namespace tributary {

double ForwardWork::Flops(const StepShape& step) const {
  return 2.0 * (static_cast<double>(layer_matrix_params) * step.tokens +
                static_cast<double>(lm_head_params) * step.logit_rows) +
         static_cast<double>(delta_rule_flops_per_token) * step.tokens +
         static_cast<double>(attention_flops_per_key) * step.attended_keys;
}

double ForwardWork::Bytes(const StepShape& step) const {
  return static_cast<double>(weight_bytes) +
         2.0 * static_cast<double>(state_bytes_per_sequence) * step.sequences +
         static_cast<double>(kv_bytes_per_token) * step.context_tokens;
}

ForwardWork ForwardWorkOf(const ModelConfig& config,
                          const ModelWeights& weights,
                          int64_t activation_bytes) {
  ForwardWork work;
  for (const TensorView* view : AllViews(weights)) {
    if (view == &weights.embed_tokens) continue;
    work.weight_bytes += static_cast<int64_t>(view->size_bytes);
    if (view->shape.size() == 2 && view != &weights.lm_head) {
      work.layer_matrix_params += view->num_elements();
    }
  }
  // AllViews lists a tied lm_head once, as the embedding.
  if (weights.tied_embeddings) {
    work.weight_bytes += static_cast<int64_t>(weights.lm_head.size_bytes);
  }
  work.lm_head_params = weights.lm_head.num_elements();
  work.state_bytes_per_sequence =
      config.gdn_state_bytes_per_sequence() +
      config.gdn_conv_state_bytes_per_sequence(activation_bytes);
  work.kv_bytes_per_token = config.kv_cache_bytes_per_token(activation_bytes);
  work.delta_rule_flops_per_token =
      7 * config.num_linear_attention_layers() *
      config.linear_num_value_heads * config.linear_key_head_dim *
      config.linear_value_head_dim;
  work.attention_flops_per_key = 4 * config.num_full_attention_layers() *
                                 config.num_attention_heads * config.head_dim;
  return work;
}

}  // namespace tributary

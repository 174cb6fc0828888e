// The decoder's tensors, resolved by name from a TensorStore and checked
// against the ModelConfig (model-spec §6.1).
#ifndef TRIBUTARY_ENGINE_MODEL_MODEL_WEIGHTS_H_
#define TRIBUTARY_ENGINE_MODEL_MODEL_WEIGHTS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_store.h"
#include "engine/model/tensor_view.h"

namespace tributary {

// Gated full attention (model-spec §3). Weights are [out, in].
struct AttentionWeights {
  TensorView q_proj;  // [2 * heads * head_dim, hidden]: per head query|gate
  TensorView k_proj;  // [kv_heads * head_dim, hidden]
  TensorView v_proj;  // [kv_heads * head_dim, hidden]
  TensorView o_proj;  // [hidden, heads * head_dim]
  TensorView q_norm;  // [head_dim], zero-centred (1 + w)
  TensorView k_norm;  // [head_dim], zero-centred (1 + w)
};

// Gated DeltaNet (model-spec §4).
struct LinearAttentionWeights {
  TensorView in_proj_qkv;  // [conv_dim, hidden]: rows q | k | v
  TensorView in_proj_z;    // [value_dim, hidden]
  TensorView in_proj_b;    // [Hv, hidden]
  TensorView in_proj_a;    // [Hv, hidden]
  TensorView conv1d;       // [conv_dim, 1, kernel]
  TensorView dt_bias;      // [Hv]
  TensorView a_log;        // [Hv] ("A_log"; fp32 in published checkpoints)
  TensorView norm;         // [dv], plain w (not 1 + w); often fp32
  TensorView out_proj;     // [hidden, value_dim]
};

// SwiGLU MLP (model-spec §5).
struct MlpWeights {
  TensorView gate_proj;  // [intermediate, hidden]
  TensorView up_proj;    // [intermediate, hidden]
  TensorView down_proj;  // [hidden, intermediate]
};

struct LayerWeights {
  LayerKind kind = LayerKind::kLinearAttention;
  TensorView input_layernorm;           // [hidden], 1 + w
  TensorView post_attention_layernorm;  // [hidden], 1 + w
  // Exactly one of the two is set, according to `kind`.
  std::optional<AttentionWeights> attention;
  std::optional<LinearAttentionWeights> linear_attention;
  MlpWeights mlp;
};

// An FP8 block weight as the checkpoint stores it: the F8_E4M3 codes
// [out, in] and their weight_scale_inv [ceil(out / 128), ceil(in / 128)]
// (F32 or BF16); views into the store's mappings.
struct Fp8WeightSource {
  TensorView weight;
  TensorView scale_inv;
};

// Views into the TensorStore's mappings: valid while the store is alive.
// The views of FP8 block weights are the exception: until kernels read FP8,
// they are dequantized at load to BF16 (w = q * scale_inv of the block,
// rounded to nearest even) in memory these weights own (dequantized_data,
// shared by copies), so that every backend and the reference decoder take
// them as they take a bf16 checkpoint.
struct ModelWeights {
  TensorView embed_tokens;  // [vocab, hidden]
  TensorView final_norm;    // [hidden], 1 + w
  // [vocab, hidden]; the same tensor as embed_tokens when tied.
  TensorView lm_head;
  bool tied_embeddings = false;
  std::vector<LayerWeights> layers;  // num_hidden_layers entries.
  // Non-fatal findings: tensors the decoder does not use (outside the
  // ignored vision tower and MTP head), an lm_head ignored because of tying.
  std::vector<std::string> warnings;
  // The FP8 block weights of the checkpoint as stored, in load order (empty
  // for a checkpoint without F8_E4M3 tensors).
  std::vector<Fp8WeightSource> fp8_weights;
  // The bf16 data the dequantized views point into.
  std::vector<std::shared_ptr<const std::vector<uint16_t>>> dequantized_data;
};

// Every distinct tensor of `weights`, in load order (a tied lm_head once,
// as the embedding): for totals over the weights.
std::vector<const TensorView*> AllViews(const ModelWeights& weights);

// A tensor the decoder reads: its checkpoint name and shape.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// Every tensor the decoder reads for `config`, in load order (embedding,
// layers, final norm, then lm_head unless the embeddings are tied): the same
// table ResolveModelWeights checks a checkpoint against. For writing
// checkpoints (synthetic models).
std::vector<TensorSpec> DecoderTensorSpecs(const ModelConfig& config);

// The decoder's tensors for `config` with names, dtypes (`dtype`, BF16 or
// F32; F32 for A_log and the GDN norm, as published checkpoints store them)
// and shapes, but no data (null views): a synthetic model whose weights the
// decoder makes on its backend (HybridDecoder, WeightLoadOptions).
ModelWeights SyntheticModelWeights(const ModelConfig& config,
                                   DType dtype = DType::kBF16);

// Resolves every tensor the decoder needs under config.weights_prefix().
// Every needed tensor must exist (else INVALID_ARGUMENT listing up to 10
// missing names and the count), have dtype BF16, F16 or F32, and have the
// shape the config implies (the error names the tensor, both shapes and the
// config fields behind the expected one).
//
// FP8 block checkpoints (config.quantization set): a projection matrix
// X.weight may be F8_E4M3 when its module is not in the config's
// not-converted list; X.weight_scale_inv must then exist, be F32 or BF16 of
// shape [ceil(out / 128), ceil(in / 128)] with finite, non-negative values,
// and the codes must not be NaN (0x7F / 0xFF). Such a weight is dequantized
// to BF16 (ModelWeights::dequantized_data). Every other tensor, and every
// F8_E5M2 tensor, is refused; errors name the file and the tensor.
//
// Tied embeddings (transformers semantics, model-spec §1.2b):
//   lm_head.weight absent,  tie_word_embeddings true  -> tied;
//   lm_head.weight present, tie_word_embeddings false -> untied;
//   lm_head.weight absent,  tie_word_embeddings false -> error (transformers
//     would initialise a random head: garbage output, so refuse);
//   lm_head.weight present, tie_word_embeddings true  -> tied, lm_head.weight
//     ignored with a warning (transformers ties after loading, so the
//     embedding wins and the stored head is never used).
// Tensors under "model.visual." and "mtp." are ignored silently.
absl::StatusOr<ModelWeights> ResolveModelWeights(const ModelConfig& config,
                                                 const TensorStore& store);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_MODEL_WEIGHTS_H_

// The decoder's configuration, read from a Hugging Face config.json
// (model-spec.md §1): model_type "qwen3_5" (decoder fields nested in
// text_config, weights under "model.language_model.") or "qwen3_5_text"
// (flat, weights under "model.").
#ifndef TRIBUTARY_ENGINE_MODEL_MODEL_CONFIG_H_
#define TRIBUTARY_ENGINE_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tributary {

enum class ModelLayout {
  kQwen3_5,      // model_type "qwen3_5": VLM config, decoder in text_config.
  kQwen3_5Text,  // model_type "qwen3_5_text": flat text-only config.
};

enum class LayerKind {
  kLinearAttention,  // "linear_attention": Gated DeltaNet.
  kFullAttention,    // "full_attention": gated softmax attention.
};

absl::string_view LayerKindName(LayerKind kind);

// config.json's quantization_config for Qwen's FP8 block checkpoints
// (transformers' FineGrainedFP8Config): only quant_method "fp8", fmt
// "e4m3", activation_scheme "dynamic" and weight_block_size [128, 128] are
// accepted; anything else is refused naming config.json and the field.
struct QuantizationConfig {
  std::string quant_method = "fp8";
  std::string fmt = "e4m3";
  std::string activation_scheme = "dynamic";
  int64_t block_rows = 128;  // weight_block_size[0]: along a weight's rows (out)
  int64_t block_cols = 128;  // weight_block_size[1]: along its columns (in)
  // modules_to_not_convert and ignored_layers, in that order: modules whose
  // weights stay in their stored (float) dtype.
  std::vector<std::string> modules_to_not_convert;

  // True when `tensor_name` (e.g. "model.layers.3.mlp.down_proj.weight")
  // belongs to a listed module: as transformers' replace_with_fp8_linear,
  // an entry matches when it is a substring of the name or of the name with
  // every run of digits replaced by "*"; "lm_head" is always listed.
  bool IsNotConverted(absl::string_view tensor_name) const;
};

// A plain, validated value: ParseModelConfig returns only configs that pass
// ValidateModelConfig, so the derived quantities below never overflow and
// the divisibility they rely on holds. Field defaults are transformers'
// Qwen3_5TextConfig class defaults (model-spec §1.1), NOT the 27B values.
struct ModelConfig {
  std::string model_type = "qwen3_5_text";
  ModelLayout layout = ModelLayout::kQwen3_5Text;

  int64_t vocab_size = 248320;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 12288;
  int64_t num_hidden_layers = 32;
  // One entry per decoder layer; from `layer_types`, else built from
  // full_attention_interval.
  std::vector<LayerKind> layer_types;
  int64_t full_attention_interval = 4;

  // Full-attention layers.
  int64_t num_attention_heads = 16;
  int64_t num_key_value_heads = 4;
  int64_t head_dim = 256;
  bool attention_bias = false;    // Must be false (no biases supported).
  bool attn_output_gate = true;   // Informational: HF always gates.
  double rope_theta = 10000.0;
  double partial_rotary_factor = 0.25;
  std::string rope_type = "default";
  std::vector<int64_t> mrope_section;  // Multimodal only; empty if absent.
  bool mrope_interleaved = false;
  int64_t max_position_embeddings = 32768;

  // Gated DeltaNet layers.
  int64_t linear_num_key_heads = 16;
  int64_t linear_num_value_heads = 32;
  int64_t linear_key_head_dim = 128;
  int64_t linear_value_head_dim = 128;
  int64_t linear_conv_kernel_dim = 4;

  std::string hidden_act = "silu";
  double rms_norm_eps = 1e-6;
  // text_config first, then the top level; default false.
  bool tie_word_embeddings = false;

  // config.json's eos_token_id (top level first, then text_config, as
  // transformers' GenerationConfig.from_model_config); empty when absent.
  // The stop-token precedence across files is in ModelDirectory.
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id;
  std::optional<int64_t> pad_token_id;

  // Informational strings ("" when absent).
  std::string dtype;            // "dtype", else "torch_dtype".
  std::string mamba_ssm_dtype;  // Recurrent-state dtype hint.
  int64_t mtp_num_hidden_layers = 0;

  // config.json's top-level quantization_config; nullopt when absent.
  std::optional<QuantizationConfig> quantization;

  // "model.language_model." or "model.".
  std::string weights_prefix() const;

  // Derived quantities (valid once validated).
  int64_t num_full_attention_layers() const;
  int64_t num_linear_attention_layers() const;
  // head_dim * partial_rotary_factor (64 for 27B).
  int64_t rotary_dim() const;
  int64_t num_queries_per_kv_head() const;
  // q_proj output rows: query and gate per head, 2 * heads * head_dim.
  int64_t q_proj_rows() const;
  // num_attention_heads * head_dim (o_proj input).
  int64_t attention_output_dim() const;
  // num_key_value_heads * head_dim (k_proj / v_proj rows).
  int64_t kv_proj_rows() const;
  double attention_scale() const;  // head_dim^-1/2
  // GDN: Hk * dk, Hv * dv, 2 * key_dim + value_dim, Hv / Hk.
  int64_t linear_key_dim() const;
  int64_t linear_value_dim() const;
  int64_t linear_conv_dim() const;
  int64_t linear_value_heads_per_key_head() const;

  // KV cache of all full-attention layers, K and V, per token
  // (65536 for 27B in bf16).
  int64_t kv_cache_bytes_per_token(int64_t bytes_per_element = 2) const;
  // GDN recurrent states of all linear layers, [Hv, dk, dv] each, per
  // sequence (150994944 = 144 MiB for 27B in fp32).
  int64_t gdn_state_bytes_per_sequence(int64_t bytes_per_element = 4) const;
  // GDN conv windows (the kernel-1 newest pre-conv inputs) of all linear
  // layers, per sequence (2949120 for 27B in bf16).
  int64_t gdn_conv_state_bytes_per_sequence(int64_t bytes_per_element = 2) const;
};

// Parses config.json text. `source` (the file name) starts every error.
// Unsupported model types and features (attention_bias, non-default RoPE
// scaling) are UNIMPLEMENTED; everything else INVALID_ARGUMENT.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text,
                                             absl::string_view source);

// Reads and parses `dir`/config.json.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir);

// Checks the invariants listed in model_config.cc (positive sizes, head
// divisibility, rotary dim, eps, layer kinds, no overflow in the derived
// quantities). Errors name the field as it appears in `source`.
absl::Status ValidateModelConfig(const ModelConfig& config,
                                 absl::string_view source);

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_MODEL_CONFIG_H_

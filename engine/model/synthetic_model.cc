#include "engine/model/synthetic_model.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace tributary {
namespace {

// The sizes that differ between the published models (model-spec §1.3);
// everything else is shared: head_dim 256, GDN head dims 128, conv kernel 4,
// θ = 1e7, partial rotary 0.25, vocab 248320, attention every 4th layer,
// eps 1e-6.
struct Preset {
  const char* name;
  int64_t hidden, intermediate, layers, q_heads, kv_heads, gdn_key_heads,
      gdn_value_heads;
  bool tied;
};

constexpr Preset kPresets[] = {
    {"qwen3.5-27b", 5120, 17408, 64, 24, 4, 16, 48, false},
    {"qwen3.5-9b", 4096, 12288, 32, 16, 4, 16, 32, false},
    {"qwen3.5-4b", 2560, 9216, 32, 16, 4, 16, 32, true},
    {"qwen3.5-2b", 2048, 6144, 24, 8, 2, 16, 16, true},
    {"qwen3.5-0.8b", 1024, 3584, 24, 8, 2, 16, 16, true},
};

}  // namespace

std::vector<std::string> SyntheticModelPresets() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  names.push_back("tiny");
  return names;
}

absl::StatusOr<ModelConfig> SyntheticModelConfig(absl::string_view preset) {
  ModelConfig c;
  c.model_type = "qwen3_5_text";
  c.layout = ModelLayout::kQwen3_5Text;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1e7;
  c.partial_rotary_factor = 0.25;
  c.full_attention_interval = 4;
  c.max_position_embeddings = 262144;
  c.dtype = "bfloat16";
  c.mamba_ssm_dtype = "float32";
  const Preset* found = nullptr;
  for (const Preset& p : kPresets) {
    if (preset == p.name) found = &p;
  }
  if (found != nullptr) {
    c.vocab_size = 248320;
    c.hidden_size = found->hidden;
    c.intermediate_size = found->intermediate;
    c.num_hidden_layers = found->layers;
    c.num_attention_heads = found->q_heads;
    c.num_key_value_heads = found->kv_heads;
    c.head_dim = 256;
    c.linear_num_key_heads = found->gdn_key_heads;
    c.linear_num_value_heads = found->gdn_value_heads;
    c.linear_key_head_dim = 128;
    c.linear_value_head_dim = 128;
    c.linear_conv_kernel_dim = 4;
    c.tie_word_embeddings = found->tied;
  } else if (preset == "tiny") {
    // Every structural feature of the real models (GQA, grouped GDN value
    // heads, partial rotary, attention every 4th layer) at sizes a test
    // runs in milliseconds on the CPU.
    c.vocab_size = 512;
    c.hidden_size = 64;
    c.intermediate_size = 128;
    c.num_hidden_layers = 4;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 32;
    c.linear_num_key_heads = 2;
    c.linear_num_value_heads = 4;
    c.linear_key_head_dim = 32;
    c.linear_value_head_dim = 16;
    c.linear_conv_kernel_dim = 4;
    c.tie_word_embeddings = false;
    c.max_position_embeddings = 4096;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic model \"", preset, "\" is not one of ",
                     absl::StrJoin(SyntheticModelPresets(), ", ")));
  }
  c.layer_types.clear();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    c.layer_types.push_back((i + 1) % c.full_attention_interval == 0
                                ? LayerKind::kFullAttention
                                : LayerKind::kLinearAttention);
  }
  RETURN_IF_ERROR(ValidateModelConfig(c, absl::StrCat("synthetic:", preset)));
  return c;
}

}  // namespace tributary

#include "engine/model/model_config.h"

#include <cmath>
#include <initializer_list>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/mapped_file.h"
#include "base/status_macros.h"
#include "engine/model/json_field_reader.h"
#include "engine/model/strict_json.h"

namespace tributary {
namespace {

using Json = nlohmann::json;

constexpr absl::string_view kLinearAttention = "linear_attention";
constexpr absl::string_view kFullAttention = "full_attention";
// Sizes must fit in int32: kernels index with 32-bit integers.
constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();
// A bound on the layer count, so that a hostile config cannot make the
// parser build a huge layer list (the 27B model has 64).
constexpr int64_t kMaxNumLayers = 65536;

std::string FieldPrefix(ModelLayout layout) {
  return layout == ModelLayout::kQwen3_5 ? "text_config." : "";
}

// Multiplies `factors`; false on int64 overflow. Factors are non-negative.
bool CheckedProduct(std::initializer_list<int64_t> factors, int64_t* out) {
  int64_t product = 1;
  for (int64_t factor : factors) {
    if (__builtin_mul_overflow(product, factor, &product)) return false;
  }
  *out = product;
  return true;
}

// Reads the RoPE settings: rope_parameters first, then the legacy
// rope_scaling object and top-level rope_theta / partial_rotary_factor.
absl::Status ReadRope(const JsonFieldReader& decoder, ModelConfig* config) {
  ASSIGN_OR_RETURN(const Json* rope_parameters,
                   decoder.OptionalObject("rope_parameters"));
  ASSIGN_OR_RETURN(const Json* rope_scaling,
                   decoder.OptionalObject("rope_scaling"));
  static const Json kEmpty = Json::object();
  JsonFieldReader params(rope_parameters ? *rope_parameters : kEmpty,
                         decoder.source(),
                         decoder.FieldName("rope_parameters."));
  JsonFieldReader scaling(rope_scaling ? *rope_scaling : kEmpty,
                          decoder.source(), decoder.FieldName("rope_scaling."));

  ASSIGN_OR_RETURN(std::optional<double> theta,
                   params.OptionalDouble("rope_theta"));
  if (!theta.has_value()) {
    ASSIGN_OR_RETURN(theta, decoder.OptionalDouble("rope_theta"));
  }
  config->rope_theta = theta.value_or(10000.0);

  ASSIGN_OR_RETURN(std::optional<double> factor,
                   params.OptionalDouble("partial_rotary_factor"));
  if (!factor.has_value()) {
    ASSIGN_OR_RETURN(factor, decoder.OptionalDouble("partial_rotary_factor"));
  }
  config->partial_rotary_factor = factor.value_or(0.25);

  // The RoPE type: rope_type (or the older "type") in either object.
  for (const JsonFieldReader* reader : {&params, &scaling}) {
    for (absl::string_view key : {"rope_type", "type"}) {
      ASSIGN_OR_RETURN(std::optional<std::string> type,
                       reader->OptionalString(key));
      if (!type.has_value()) continue;
      // "mrope" is the older name of the multimodal variant; for text
      // positions both are plain RoPE.
      if (*type != "default" && *type != "mrope") {
        return absl::UnimplementedError(
            absl::StrCat(reader->source(), ": ", reader->FieldName(key),
                         " = \"", *type,
                         "\" is not supported (only \"default\" RoPE)"));
      }
      config->rope_type = *type;
    }
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> section,
                     reader->OptionalIntList("mrope_section"));
    if (section.has_value() && config->mrope_section.empty()) {
      config->mrope_section = *section;
    }
    ASSIGN_OR_RETURN(std::optional<bool> interleaved,
                     reader->OptionalBool("mrope_interleaved"));
    if (interleaved.has_value()) config->mrope_interleaved = *interleaved;
  }
  return absl::OkStatus();
}

absl::Status ReadLayerTypes(const JsonFieldReader& decoder,
                            ModelConfig* config) {
  ASSIGN_OR_RETURN(config->full_attention_interval,
                   decoder.Int("full_attention_interval", 4));
  ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> names,
                   decoder.OptionalStringList("layer_types"));
  config->layer_types.clear();
  if (names.has_value()) {
    for (size_t i = 0; i < names->size(); ++i) {
      const std::string& name = (*names)[i];
      if (name == kLinearAttention) {
        config->layer_types.push_back(LayerKind::kLinearAttention);
      } else if (name == kFullAttention) {
        config->layer_types.push_back(LayerKind::kFullAttention);
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            decoder.source(), ": ", decoder.FieldName("layer_types"), "[", i,
            "] = \"", name, "\" is not \"", kLinearAttention, "\" or \"",
            kFullAttention, "\""));
      }
    }
    return absl::OkStatus();
  }
  const int64_t interval = config->full_attention_interval;
  if (interval <= 0) {
    return decoder.Error("full_attention_interval", "must be positive");
  }
  if (config->num_hidden_layers <= 0 ||
      config->num_hidden_layers > kMaxNumLayers) {
    return absl::OkStatus();  // ValidateModelConfig reports it.
  }
  for (int64_t i = 0; i < config->num_hidden_layers; ++i) {
    config->layer_types.push_back((i + 1) % interval == 0
                                      ? LayerKind::kFullAttention
                                      : LayerKind::kLinearAttention);
  }
  return absl::OkStatus();
}

absl::Status ReadDecoderFields(const JsonFieldReader& d, ModelConfig* c) {
  ASSIGN_OR_RETURN(c->vocab_size, d.Int("vocab_size", c->vocab_size));
  ASSIGN_OR_RETURN(c->hidden_size, d.Int("hidden_size", c->hidden_size));
  ASSIGN_OR_RETURN(c->intermediate_size,
                   d.Int("intermediate_size", c->intermediate_size));
  ASSIGN_OR_RETURN(c->num_hidden_layers,
                   d.Int("num_hidden_layers", c->num_hidden_layers));
  ASSIGN_OR_RETURN(c->num_attention_heads,
                   d.Int("num_attention_heads", c->num_attention_heads));
  ASSIGN_OR_RETURN(c->num_key_value_heads,
                   d.Int("num_key_value_heads", c->num_key_value_heads));
  ASSIGN_OR_RETURN(c->head_dim, d.Int("head_dim", c->head_dim));
  ASSIGN_OR_RETURN(c->attention_bias,
                   d.Bool("attention_bias", c->attention_bias));
  ASSIGN_OR_RETURN(c->attn_output_gate,
                   d.Bool("attn_output_gate", c->attn_output_gate));
  ASSIGN_OR_RETURN(c->max_position_embeddings,
                   d.Int("max_position_embeddings", c->max_position_embeddings));
  ASSIGN_OR_RETURN(c->linear_num_key_heads,
                   d.Int("linear_num_key_heads", c->linear_num_key_heads));
  ASSIGN_OR_RETURN(c->linear_num_value_heads,
                   d.Int("linear_num_value_heads", c->linear_num_value_heads));
  ASSIGN_OR_RETURN(c->linear_key_head_dim,
                   d.Int("linear_key_head_dim", c->linear_key_head_dim));
  ASSIGN_OR_RETURN(c->linear_value_head_dim,
                   d.Int("linear_value_head_dim", c->linear_value_head_dim));
  ASSIGN_OR_RETURN(c->linear_conv_kernel_dim,
                   d.Int("linear_conv_kernel_dim", c->linear_conv_kernel_dim));
  ASSIGN_OR_RETURN(std::optional<std::string> act,
                   d.OptionalString("hidden_act"));
  if (act.has_value()) c->hidden_act = *act;
  ASSIGN_OR_RETURN(std::optional<double> eps, d.OptionalDouble("rms_norm_eps"));
  if (eps.has_value()) c->rms_norm_eps = *eps;
  ASSIGN_OR_RETURN(std::optional<std::string> ssm_dtype,
                   d.OptionalString("mamba_ssm_dtype"));
  if (ssm_dtype.has_value()) c->mamba_ssm_dtype = *ssm_dtype;
  ASSIGN_OR_RETURN(c->mtp_num_hidden_layers,
                   d.Int("mtp_num_hidden_layers", c->mtp_num_hidden_layers));
  RETURN_IF_ERROR(ReadRope(d, c));
  return ReadLayerTypes(d, c);
}

// quantization_config (top level, as transformers writes it). Errors name
// config.json and the field; unsupported values are UNIMPLEMENTED.
absl::StatusOr<std::optional<QuantizationConfig>> ReadQuantization(
    const JsonFieldReader& top) {
  ASSIGN_OR_RETURN(const Json* object, top.OptionalObject("quantization_config"));
  if (object == nullptr) return std::optional<QuantizationConfig>();
  JsonFieldReader q(*object, top.source(), "quantization_config.");
  auto unsupported = [&](absl::string_view key, absl::string_view value,
                         absl::string_view supported) {
    return absl::UnimplementedError(absl::StrCat(
        q.source(), ": ", q.FieldName(key), " = ", value,
        " is not supported (", supported, ")"));
  };
  QuantizationConfig config;
  ASSIGN_OR_RETURN(std::optional<std::string> method,
                   q.OptionalString("quant_method"));
  if (!method.has_value()) return q.Error("quant_method", "is missing");
  if (*method != "fp8") {
    return unsupported("quant_method", absl::StrCat("\"", *method, "\""),
                       "only \"fp8\": Qwen's FP8 block checkpoints");
  }
  ASSIGN_OR_RETURN(std::optional<std::string> fmt, q.OptionalString("fmt"));
  if (fmt.has_value()) {
    if (*fmt != "e4m3") {
      return unsupported("fmt", absl::StrCat("\"", *fmt, "\""),
                         "only \"e4m3\"");
    }
    config.fmt = *fmt;
  }
  ASSIGN_OR_RETURN(std::optional<std::string> scheme,
                   q.OptionalString("activation_scheme"));
  if (scheme.has_value()) {
    // Block FP8 quantizes activations per token-block at run time; vLLM's
    // Fp8LinearMethod refuses "static" with weight_block_size too.
    if (*scheme != "dynamic") {
      return unsupported("activation_scheme",
                         absl::StrCat("\"", *scheme, "\""),
                         "only \"dynamic\" with weight_block_size");
    }
    config.activation_scheme = *scheme;
  }
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> block,
                   q.OptionalIntList("weight_block_size"));
  if (!block.has_value()) {
    return absl::UnimplementedError(absl::StrCat(
        q.source(), ": ", q.FieldName("weight_block_size"),
        " is missing: per-tensor FP8 (weight_scale) is not supported, only "
        "block FP8 with weight_block_size [128, 128]"));
  }
  if (block->size() != 2 || (*block)[0] != 128 || (*block)[1] != 128) {
    return unsupported("weight_block_size",
                       absl::StrCat("[", absl::StrJoin(*block, ", "), "]"),
                       "only [128, 128]");
  }
  config.block_rows = (*block)[0];
  config.block_cols = (*block)[1];
  for (absl::string_view key : {"modules_to_not_convert", "ignored_layers"}) {
    ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> names,
                     q.OptionalStringList(key));
    if (!names.has_value()) continue;
    for (size_t i = 0; i < names->size(); ++i) {
      if ((*names)[i].empty()) {
        return q.Error(key, absl::StrCat("has an empty entry at [", i, "]"));
      }
      config.modules_to_not_convert.push_back((*names)[i]);
    }
  }
  return std::optional<QuantizationConfig>(std::move(config));
}

}  // namespace

bool QuantizationConfig::IsNotConverted(absl::string_view tensor_name) const {
  std::string starred;
  for (size_t i = 0; i < tensor_name.size();) {
    if (absl::ascii_isdigit(tensor_name[i])) {
      starred.push_back('*');
      while (i < tensor_name.size() && absl::ascii_isdigit(tensor_name[i])) ++i;
    } else {
      starred.push_back(tensor_name[i++]);
    }
  }
  auto listed = [&](absl::string_view entry) {
    return absl::StrContains(tensor_name, entry) ||
           absl::StrContains(starred, entry);
  };
  if (listed("lm_head")) return true;
  for (const std::string& entry : modules_to_not_convert) {
    if (listed(entry)) return true;
  }
  return false;
}

absl::string_view LayerKindName(LayerKind kind) {
  return kind == LayerKind::kFullAttention ? kFullAttention : kLinearAttention;
}

std::string ModelConfig::weights_prefix() const {
  return layout == ModelLayout::kQwen3_5 ? "model.language_model." : "model.";
}

int64_t ModelConfig::num_full_attention_layers() const {
  int64_t n = 0;
  for (LayerKind kind : layer_types) n += kind == LayerKind::kFullAttention;
  return n;
}
int64_t ModelConfig::num_linear_attention_layers() const {
  return static_cast<int64_t>(layer_types.size()) - num_full_attention_layers();
}
int64_t ModelConfig::rotary_dim() const {
  return static_cast<int64_t>(
      std::llround(static_cast<double>(head_dim) * partial_rotary_factor));
}
int64_t ModelConfig::num_queries_per_kv_head() const {
  return num_attention_heads / num_key_value_heads;
}
int64_t ModelConfig::q_proj_rows() const {
  return 2 * num_attention_heads * head_dim;
}
int64_t ModelConfig::attention_output_dim() const {
  return num_attention_heads * head_dim;
}
int64_t ModelConfig::kv_proj_rows() const {
  return num_key_value_heads * head_dim;
}
double ModelConfig::attention_scale() const {
  return 1.0 / std::sqrt(static_cast<double>(head_dim));
}
int64_t ModelConfig::linear_key_dim() const {
  return linear_num_key_heads * linear_key_head_dim;
}
int64_t ModelConfig::linear_value_dim() const {
  return linear_num_value_heads * linear_value_head_dim;
}
int64_t ModelConfig::linear_conv_dim() const {
  return 2 * linear_key_dim() + linear_value_dim();
}
int64_t ModelConfig::linear_value_heads_per_key_head() const {
  return linear_num_value_heads / linear_num_key_heads;
}
int64_t ModelConfig::kv_cache_bytes_per_token(int64_t bytes_per_element) const {
  return num_full_attention_layers() * 2 * kv_proj_rows() * bytes_per_element;
}
int64_t ModelConfig::gdn_state_bytes_per_sequence(
    int64_t bytes_per_element) const {
  return num_linear_attention_layers() * linear_num_value_heads *
         linear_key_head_dim * linear_value_head_dim * bytes_per_element;
}
int64_t ModelConfig::gdn_conv_state_bytes_per_sequence(
    int64_t bytes_per_element) const {
  return num_linear_attention_layers() * linear_conv_dim() *
         (linear_conv_kernel_dim - 1) * bytes_per_element;
}

absl::Status ValidateModelConfig(const ModelConfig& c,
                                 absl::string_view source) {
  const std::string prefix = FieldPrefix(c.layout);
  auto error = [&](absl::string_view field, const auto& value,
                   absl::string_view reason) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", prefix, field, " = ", value, " ", reason));
  };
  const std::pair<absl::string_view, int64_t> sizes[] = {
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings},
      {"linear_num_key_heads", c.linear_num_key_heads},
      {"linear_num_value_heads", c.linear_num_value_heads},
      {"linear_key_head_dim", c.linear_key_head_dim},
      {"linear_value_head_dim", c.linear_value_head_dim},
      {"linear_conv_kernel_dim", c.linear_conv_kernel_dim},
  };
  for (const auto& [field, value] : sizes) {
    if (value <= 0) return error(field, value, "must be positive");
    if (value > kMaxSize) {
      return error(field, value, absl::StrCat("exceeds ", kMaxSize));
    }
  }
  if (c.num_hidden_layers > kMaxNumLayers) {
    return error("num_hidden_layers", c.num_hidden_layers,
                 absl::StrCat("exceeds ", kMaxNumLayers));
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return error("num_key_value_heads", c.num_key_value_heads,
                 absl::StrCat("does not divide num_attention_heads = ",
                              c.num_attention_heads));
  }
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0) {
    return error("linear_num_key_heads", c.linear_num_key_heads,
                 absl::StrCat("does not divide linear_num_value_heads = ",
                              c.linear_num_value_heads));
  }
  if (c.hidden_act != "silu") {
    return error("hidden_act", absl::StrCat("\"", c.hidden_act, "\""),
                 "is not supported (only \"silu\")");
  }
  if (!(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0)) {
    return error("rms_norm_eps", c.rms_norm_eps, "must be positive and finite");
  }
  if (!(std::isfinite(c.rope_theta) && c.rope_theta > 0)) {
    return error("rope_theta", c.rope_theta, "must be positive and finite");
  }
  const double rotary = static_cast<double>(c.head_dim) * c.partial_rotary_factor;
  if (!(std::isfinite(c.partial_rotary_factor) && c.partial_rotary_factor > 0 &&
        c.partial_rotary_factor <= 1)) {
    return error("partial_rotary_factor", c.partial_rotary_factor,
                 "must be in (0, 1]");
  }
  if (std::fabs(rotary - std::round(rotary)) > 1e-6 || c.rotary_dim() <= 0 ||
      c.rotary_dim() % 2 != 0) {
    return error("partial_rotary_factor", c.partial_rotary_factor,
                 absl::StrCat("gives rotary dim head_dim * factor = ", rotary,
                              ", not a positive even integer"));
  }
  if (c.attention_bias) {
    return absl::UnimplementedError(absl::StrCat(
        source, ": ", prefix,
        "attention_bias = true is not supported (Qwen3.5 has no biases)"));
  }
  if (static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers) {
    return error("layer_types", absl::StrCat("<", c.layer_types.size(),
                                             " entries>"),
                 absl::StrCat("does not match num_hidden_layers = ",
                              c.num_hidden_layers));
  }
  int64_t unused = 0;
  const int64_t num_layers = c.num_hidden_layers;
  if (!CheckedProduct({2, c.num_attention_heads, c.head_dim}, &unused) ||
      !CheckedProduct({c.vocab_size, c.hidden_size}, &unused) ||
      !CheckedProduct({num_layers, 4, c.num_key_value_heads, c.head_dim,
                       c.linear_conv_kernel_dim},
                      &unused) ||
      !CheckedProduct({num_layers, 8, c.linear_num_value_heads,
                       c.linear_key_head_dim, c.linear_value_head_dim},
                      &unused) ||
      !CheckedProduct({num_layers, 8, 3, c.linear_num_key_heads + 1,
                       c.linear_key_head_dim, c.linear_conv_kernel_dim},
                      &unused) ||
      !CheckedProduct({num_layers, 8, 3, c.linear_num_value_heads,
                       c.linear_value_head_dim, c.linear_conv_kernel_dim},
                      &unused) ||
      !CheckedProduct({3, c.linear_num_value_heads, c.linear_value_head_dim,
                       c.hidden_size},
                      &unused)) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": sizes too large: derived quantities overflow 64 bits"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json_text,
                                             absl::string_view source) {
  ASSIGN_OR_RETURN(Json root, ParseStrictJsonObject(json_text, source));
  JsonFieldReader top(root, std::string(source), "");
  ASSIGN_OR_RETURN(std::optional<std::string> model_type,
                   top.OptionalString("model_type"));
  if (!model_type.has_value()) return top.Error("model_type", "is missing");

  ModelConfig config;
  config.model_type = *model_type;
  const Json* decoder_json = &root;
  if (*model_type == "qwen3_5") {
    config.layout = ModelLayout::kQwen3_5;
    ASSIGN_OR_RETURN(decoder_json, top.OptionalObject("text_config"));
    if (decoder_json == nullptr) {
      return top.Error("text_config",
                       "is missing (model_type \"qwen3_5\" nests the decoder "
                       "config in text_config)");
    }
  } else if (*model_type == "qwen3_5_text") {
    config.layout = ModelLayout::kQwen3_5Text;
  } else {
    return absl::UnimplementedError(absl::StrCat(
        source, ": model_type = \"", *model_type,
        "\" is not supported (expected \"qwen3_5\" or \"qwen3_5_text\")"));
  }
  JsonFieldReader decoder(*decoder_json, std::string(source),
                          FieldPrefix(config.layout));
  if (config.layout == ModelLayout::kQwen3_5) {
    ASSIGN_OR_RETURN(std::optional<std::string> inner_type,
                     decoder.OptionalString("model_type"));
    if (inner_type.has_value() && *inner_type != "qwen3_5_text") {
      return decoder.Error("model_type", "is not \"qwen3_5_text\"");
    }
  }
  RETURN_IF_ERROR(ReadDecoderFields(decoder, &config));

  // Fields with their own precedence across the two levels.
  const bool nested = config.layout == ModelLayout::kQwen3_5;
  ASSIGN_OR_RETURN(std::optional<bool> tie,
                   decoder.OptionalBool("tie_word_embeddings"));
  if (!tie.has_value() && nested) {
    ASSIGN_OR_RETURN(tie, top.OptionalBool("tie_word_embeddings"));
  }
  config.tie_word_embeddings = tie.value_or(false);

  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> eos,
                   top.OptionalIntOrIntList("eos_token_id"));
  if (!eos.has_value() && nested) {
    ASSIGN_OR_RETURN(eos, decoder.OptionalIntOrIntList("eos_token_id"));
  }
  if (eos.has_value()) config.eos_token_ids = *eos;
  for (absl::string_view key : {"bos_token_id", "pad_token_id"}) {
    ASSIGN_OR_RETURN(std::optional<int64_t> id, top.OptionalInt(key));
    if (!id.has_value() && nested) {
      ASSIGN_OR_RETURN(id, decoder.OptionalInt(key));
    }
    (key == "bos_token_id" ? config.bos_token_id : config.pad_token_id) = id;
  }
  for (const JsonFieldReader* reader : {&decoder, &top}) {
    for (absl::string_view key : {"dtype", "torch_dtype"}) {
      if (!config.dtype.empty()) break;
      ASSIGN_OR_RETURN(std::optional<std::string> dtype,
                       reader->OptionalString(key));
      if (dtype.has_value()) config.dtype = *dtype;
    }
  }

  ASSIGN_OR_RETURN(config.quantization, ReadQuantization(top));

  RETURN_IF_ERROR(ValidateModelConfig(config, source));
  for (int64_t id : config.eos_token_ids) {
    if (id < 0 || id >= config.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": eos_token_id ", id, " is outside [0, ",
                       "vocab_size = ", config.vocab_size, ")"));
    }
  }
  return config;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& dir) {
  const std::string path =
      dir.empty() || dir.back() == '/' ? dir + "config.json"
                                       : dir + "/config.json";
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  return ParseModelConfig(text, path);
}

}  // namespace tributary

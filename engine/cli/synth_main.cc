// tributary-synth: writes a random-weight model directory (config.json +
// model.safetensors) of a given shape, for benchmarks and tests that need a
// model of a realistic size without a checkpoint.
//
//   (kUsage below, which --help prints)
//
// Presets: mid-size (the CPU benchmark model of bench/README.md: hidden 1024,
// intermediate 2816, 8 layers with every fourth full attention, 8 query / 2
// KV heads of 128, partial rotary 0.25, GDN 4 key / 8 value heads of 128,
// conv 4, vocabulary 32000, untied; about 330 MB in bf16).
//
// The tensor list comes from the loader's own table (DecoderTensorSpecs), so
// whatever this writes loads. Matrices are N(0, 1/in_features), RMSNorm
// offsets N(0, 0.1²), the GDN norm weight 1 + N(0, 0.1²), A_log log U(1, 16),
// dt_bias N(0, 0.1²): finite activations of a plausible size.
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/element_type.h"
#include "base/cli.h"
#include "base/logging.h"
#include "base/mapped_file.h"
#include "base/status_macros.h"
#include "engine/model/model_config.h"
#include "engine/model/model_directory.h"
#include "engine/model/model_weights.h"
#include "engine/model/safetensors_writer.h"

namespace tributary {
namespace {

constexpr char kUsage[] = R"(usage: tributary-synth (--preset NAME | --config FILE) --out DIR
                       [--dtype bf16|f16|f32] [--seed N]
Flags and presets: docs/tools.md.
)";

}  // namespace
namespace {

constexpr char kMidSizeConfig[] = R"({
  "architectures": ["Qwen3_5ForCausalLM"],
  "model_type": "qwen3_5_text",
  "vocab_size": 32000,
  "hidden_size": 1024,
  "intermediate_size": 2816,
  "num_hidden_layers": 8,
  "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                  "full_attention", "linear_attention", "linear_attention",
                  "linear_attention", "full_attention"],
  "num_attention_heads": 8,
  "num_key_value_heads": 2,
  "head_dim": 128,
  "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0,
                      "partial_rotary_factor": 0.25},
  "partial_rotary_factor": 0.25,
  "linear_num_key_heads": 4,
  "linear_num_value_heads": 8,
  "linear_key_head_dim": 128,
  "linear_value_head_dim": 128,
  "linear_conv_kernel_dim": 4,
  "hidden_act": "silu",
  "rms_norm_eps": 1e-06,
  "max_position_embeddings": 32768,
  "tie_word_embeddings": false,
  "dtype": "bfloat16"
}
)";

void Store(float value, DType dtype, uint8_t* dst) {
  switch (dtype) {
    case DType::kBF16: {
      const uint16_t bits = F32ToBf16(value);
      std::memcpy(dst, &bits, 2);
      break;
    }
    case DType::kF16: {
      const uint16_t bits = F32ToF16(value);
      std::memcpy(dst, &bits, 2);
      break;
    }
    default:
      std::memcpy(dst, &value, 4);
  }
}

absl::Status Run(int argc, char** argv) {
  ASSIGN_OR_RETURN(CliArgs args,
                   CliArgs::Parse(argc, argv,
                                  {"preset", "config", "out", "dtype", "seed"}, {}));
  if (!args.positional().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", args.positional()[0], "'"));
  }
  if (args.Has("preset") == args.Has("config")) {
    return absl::InvalidArgumentError("give exactly one of --preset and --config");
  }
  auto out = args.Get("out");
  if (!out) return absl::InvalidArgumentError("--out DIR is required");
  ASSIGN_OR_RETURN(int64_t seed, args.GetInt("seed", 1, 0, INT64_MAX));
  const std::string dtype_name = args.GetOr("dtype", "bf16");
  DType dtype;
  if (dtype_name == "bf16") {
    dtype = DType::kBF16;
  } else if (dtype_name == "f16") {
    dtype = DType::kF16;
  } else if (dtype_name == "f32") {
    dtype = DType::kF32;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dtype must be bf16, f16 or f32, got '", dtype_name, "'"));
  }

  std::string config_text;
  if (auto preset = args.Get("preset")) {
    if (*preset != "mid-size") {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown --preset '", *preset, "' (known: mid-size)"));
    }
    config_text = kMidSizeConfig;
  } else {
    ASSIGN_OR_RETURN(config_text, ReadFileToString(*args.Get("config")));
  }
  ASSIGN_OR_RETURN(ModelConfig config, ParseModelConfig(config_text, "config.json"));

  if (::mkdir(out->c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(
        absl::StrCat(*out, ": cannot create: ", std::strerror(errno)));
  }
  {
    std::ofstream file(*out + "/config.json");
    file << config_text;
    if (!file) return absl::InternalError(absl::StrCat(*out, "/config.json: cannot write"));
  }

  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<TensorToWrite> tensors;
  int64_t num_parameters = 0;
  for (const TensorSpec& spec : DecoderTensorSpecs(config)) {
    TensorToWrite t;
    t.name = spec.name;
    t.shape = spec.shape;
    // A_log and the GDN norm stay f32, as in published checkpoints.
    const bool keep_f32 = absl::EndsWith(spec.name, "A_log") ||
                          absl::EndsWith(spec.name, "linear_attn.norm.weight");
    t.dtype = keep_f32 ? DType::kF32 : dtype;
    int64_t n = 1;
    for (int64_t e : spec.shape) n *= e;
    num_parameters += n;
    const std::string name = spec.name;
    const int64_t fan_in = spec.shape.size() >= 2 ? spec.shape.back() : 1;
    t.fill = [&rng, name, fan_in, dtype = t.dtype, n](uint8_t* dst, size_t) {
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::uniform_real_distribution<float> uniform(1.0f, 16.0f);
      const size_t width = DTypeSizeBytes(dtype);
      for (int64_t i = 0; i < n; ++i) {
        float v;
        if (absl::EndsWith(name, "A_log")) {
          v = std::log(uniform(rng));
        } else if (absl::EndsWith(name, "linear_attn.norm.weight")) {
          v = 1.0f + 0.1f * normal(rng);
        } else if (absl::EndsWith(name, "conv1d.weight")) {
          v = 0.5f * normal(rng);
        } else if (fan_in > 1) {
          v = normal(rng) / std::sqrt(static_cast<float>(fan_in));
        } else {
          v = 0.1f * normal(rng);
        }
        Store(v, dtype, dst + i * width);
      }
    };
    tensors.push_back(std::move(t));
  }
  const std::string path = *out + "/model.safetensors";
  RETURN_IF_ERROR(WriteSafetensors(path, tensors, {{"format", "pt"}}));
  // Read it back through the loader: what this tool writes must load.
  ASSIGN_OR_RETURN(ModelDirectory model, ModelDirectory::Load(*out));
  LogInfo("wrote ", *out, ": ", num_parameters, " parameters, ",
          model.weights().layers.size(), " layers");
  return absl::OkStatus();
}

}  // namespace
}  // namespace tributary

int main(int argc, char** argv) {
  return tributary::RunCliMain("tributary-synth", argc, argv, tributary::kUsage,
                               [&] { return tributary::Run(argc, argv); });
}

// Qwen's FP8 block checkpoints in the loader: quantization_config, F8_E4M3
// projection matrices with their weight_scale_inv, dequantized to bf16; and
// the catalog of refusals (each names config.json and the field, or the file
// and the tensor).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/backend/element_type.h"
#include "engine/model/fp8.h"
#include "engine/model/model_config.h"
#include "engine/model/model_directory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/test_files.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using ::tributary::testing::BuildSafetensors;
using ::tributary::testing::TempDir;
using ::tributary::testing::TestTensor;
using ::tributary::testing::TinyConfigJson;
using ::tributary::testing::TinyModelOptions;
using ::tributary::testing::TinyModelTensors;
using ::tributary::testing::WriteBytes;

constexpr absl::string_view kFp8Config =
    R"("quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
        "activation_scheme": "dynamic", "weight_block_size": [128, 128],
        "modules_to_not_convert": ["lm_head", "in_proj_a"]})";

// The tiny model's config.json with `quantization` (a JSON member, or "").
std::string ConfigWith(absl::string_view quantization) {
  const std::string config = TinyConfigJson(TinyModelOptions{});
  if (quantization.empty()) return config;
  return absl::StrCat("{", quantization, ",", config.substr(1));
}

bool IsFp8Matrix(const std::string& name) {
  return absl::StrContains(name, "_proj") && absl::EndsWith(name, ".weight") &&
         !absl::StrContains(name, "in_proj_a") &&
         !absl::StrContains(name, "lm_head");
}

std::string F32Bytes(const std::vector<float>& values) {
  std::string bytes(4 * values.size(), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The tiny model with its projection matrices (but in_proj_a) stored as
// F8_E4M3 codes (code k % 0x7E: finite) and a [1, 1] F32 scale of 0.5 each.
std::vector<TestTensor> Fp8Tensors() {
  std::vector<TestTensor> out;
  for (TestTensor t : TinyModelTensors(TinyModelOptions{})) {
    if (!IsFp8Matrix(t.name)) {
      out.push_back(std::move(t));
      continue;
    }
    t.dtype = "F8_E4M3";
    t.bytes.assign(static_cast<size_t>(t.shape[0] * t.shape[1]), '\0');
    for (size_t k = 0; k < t.bytes.size(); ++k) {
      t.bytes[k] = static_cast<char>((k * 37 + 3) % 0x7E | (k % 2 ? 0x80 : 0));
    }
    out.push_back(t);
    out.push_back({t.name + "_scale_inv", "F32", {1, 1}, F32Bytes({0.5f})});
  }
  return out;
}

absl::StatusOr<ModelDirectory> LoadWith(const TempDir& dir,
                                        const std::vector<TestTensor>& tensors,
                                        absl::string_view quantization = kFp8Config) {
  WriteBytes(dir.File("config.json"), ConfigWith(quantization));
  WriteBytes(dir.File("model.safetensors"), BuildSafetensors(tensors));
  return ModelDirectory::Load(dir.path());
}

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

constexpr absl::string_view kDown =
    "model.language_model.layers.0.mlp.down_proj.weight";

TEST(Fp8WeightsTest, LoadsAndDequantizesToBf16) {
  TempDir dir;
  const std::vector<TestTensor> tensors = Fp8Tensors();
  auto model = LoadWith(dir, tensors);
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& c = model->config();
  ASSERT_TRUE(c.quantization.has_value());
  EXPECT_EQ(c.quantization->block_rows, 128);
  EXPECT_THAT(c.quantization->modules_to_not_convert,
              ::testing::ElementsAre("lm_head", "in_proj_a"));
  const ModelWeights& w = model->weights();
  // 4 layers x 3 MLP + 3 GDN x 4 (qkv, z, b, out) + 1 attention x 4.
  EXPECT_EQ(w.fp8_weights.size(), 12u + 12u + 4u);
  EXPECT_TRUE(model->warnings().empty())
      << "the scales are used: " << model->warnings()[0];
  const TensorView& down = w.layers[0].mlp.down_proj;
  EXPECT_EQ(down.dtype, DType::kBF16);
  EXPECT_EQ(down.size_bytes, 2u * 8 * 16);
  const auto* bf16 = static_cast<const uint16_t*>(down.data);
  for (const TestTensor& t : tensors) {
    if (t.name != kDown) continue;
    for (size_t k = 0; k < t.bytes.size(); ++k) {
      EXPECT_EQ(Bf16ToF32(bf16[k]),
                E4m3ToF32(static_cast<uint8_t>(t.bytes[k])) * 0.5f) << k;
    }
  }
  // in_proj_a is listed as not converted and stays BF16 as stored.
  EXPECT_EQ(w.layers[0].linear_attention->in_proj_a.dtype, DType::kBF16);
  EXPECT_EQ(w.layers[0].linear_attention->in_proj_a.data,
            model->tensors().Find(
                "model.language_model.layers.0.linear_attn.in_proj_a.weight")
                ->data);
}

TEST(Fp8WeightsTest, Bf16ScalesAreRead) {
  TempDir dir;
  std::vector<TestTensor> tensors = Fp8Tensors();
  for (TestTensor& t : tensors) {
    if (absl::EndsWith(t.name, "_scale_inv")) {
      t.dtype = "BF16";
      t.bytes = std::string("\x80\x3f", 2);  // bf16 1.0
    }
  }
  auto model = LoadWith(dir, tensors);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto* bf16 =
      static_cast<const uint16_t*>(model->weights().layers[0].mlp.down_proj.data);
  for (const TestTensor& t : tensors) {
    if (t.name == kDown) {
      EXPECT_EQ(Bf16ToF32(bf16[1]), E4m3ToF32(static_cast<uint8_t>(t.bytes[1])));
    }
  }
}

// A malformed checkpoint: what to change, and what the error must say.
struct TensorCase {
  std::string label;
  std::function<void(std::vector<TestTensor>&)> corrupt;
  std::string message;
};

class Fp8TensorCatalogTest : public ::testing::TestWithParam<TensorCase> {};

TestTensor* Named(std::vector<TestTensor>& ts, absl::string_view name) {
  for (TestTensor& t : ts) {
    if (t.name == name) return &t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return &ts[0];
}

TEST_P(Fp8TensorCatalogTest, IsRefusedNamingFileAndTensor) {
  TempDir dir;
  std::vector<TestTensor> tensors = Fp8Tensors();
  GetParam().corrupt(tensors);
  auto model = LoadWith(dir, tensors);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(model.status()), HasSubstr(GetParam().message));
  EXPECT_THAT(Message(model.status()), HasSubstr("model.safetensors: tensor \""));
}

const std::string kDownScale = absl::StrCat(kDown, "_scale_inv");

INSTANTIATE_TEST_SUITE_P(
    Refusals, Fp8TensorCatalogTest,
    ::testing::Values(
        TensorCase{"missing_scale",
                   [](auto& ts) {
                     ts.erase(std::remove_if(ts.begin(), ts.end(),
                                             [](const TestTensor& t) {
                                               return t.name == kDownScale;
                                             }),
                              ts.end());
                   },
                   absl::StrCat("\"", kDown, "\" is F8_E4M3 but its scale "
                                "tensor \"", kDownScale,
                                "\" is missing from the checkpoint")},
        TensorCase{"scale_shape",
                   [](auto& ts) {
                     TestTensor* s = Named(ts, kDownScale);
                     s->shape = {2, 1};
                     s->bytes = F32Bytes({1.0f, 1.0f});
                   },
                   absl::StrCat("\"", kDownScale,
                                "\" has shape [2, 1], expected [1, 1] = "
                                "[ceil(8 / 128), ceil(16 / 128)] for weight "
                                "[8, 16]")},
        TensorCase{"scale_dtype",
                   [](auto& ts) {
                     TestTensor* s = Named(ts, kDownScale);
                     s->dtype = "F16";
                     s->bytes = std::string("\x00\x3c", 2);
                   },
                   absl::StrCat("\"", kDownScale, "\" has dtype F16; a "
                                "weight_scale_inv must be F32 or BF16")},
        TensorCase{"scale_nan",
                   [](auto& ts) { Named(ts, kDownScale)->bytes = F32Bytes({NAN}); },
                   absl::StrCat("\"", kDownScale, "\" has scale nan at block "
                                "[0, 0]: scales must be finite and >= 0")},
        TensorCase{"scale_inf",
                   [](auto& ts) {
                     Named(ts, kDownScale)->bytes = F32Bytes({INFINITY});
                   },
                   "has scale inf at block [0, 0]"},
        TensorCase{"scale_negative",
                   [](auto& ts) { Named(ts, kDownScale)->bytes = F32Bytes({-0.5f}); },
                   "has scale -0.5 at block [0, 0]"},
        TensorCase{"weight_nan_code",
                   [](auto& ts) { Named(ts, kDown)->bytes[17] = '\xff'; },
                   absl::StrCat("\"", kDown, "\" holds the e4m3 NaN code "
                                "0xff at [1, 1]")},
        TensorCase{"weight_e5m2",
                   [](auto& ts) { Named(ts, kDown)->dtype = "F8_E5M2"; },
                   absl::StrCat("\"", kDown, "\" has dtype F8_E5M2: float8 "
                                "e5m2 is not supported")},
        TensorCase{"weight_shape",
                   [](auto& ts) {
                     TestTensor* t = Named(ts, kDown);
                     t->shape = {16, 8};
                   },
                   absl::StrCat("\"", kDown, "\" has shape [16, 8], expected "
                                "[8, 16]")},
        TensorCase{"fp8_norm",
                   [](auto& ts) {
                     Named(ts, "model.language_model.norm.weight")->dtype =
                         "F8_E4M3";
                     Named(ts, "model.language_model.norm.weight")->bytes =
                         std::string(8, '\x38');
                   },
                   "\"model.language_model.norm.weight\" has dtype F8_E4M3: "
                   "only projection matrices may be F8_E4M3"},
        TensorCase{"fp8_not_converted_module",
                   [](auto& ts) {
                     TestTensor* a = Named(
                         ts, "model.language_model.layers.0.linear_attn."
                             "in_proj_a.weight");
                     a->dtype = "F8_E4M3";
                     a->bytes = std::string(16, '\x38');
                     ts.push_back({a->name + "_scale_inv", "F32", {1, 1},
                                   F32Bytes({1.0f})});
                   },
                   "in_proj_a.weight\" has dtype F8_E4M3 but config.json's "
                   "quantization_config lists its module in "
                   "modules_to_not_convert"}),
    [](const auto& info) { return info.param.label; });

TEST(Fp8WeightsTest, Fp8WithoutQuantizationConfigIsRefused) {
  TempDir dir;
  auto model = LoadWith(dir, Fp8Tensors(), "");
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(Message(model.status()),
              HasSubstr("has dtype F8_E4M3 but config.json has no "
                        "quantization_config"));
}

// quantization_config values the code does not support.
struct ConfigCase {
  std::string label;
  std::string quantization;  // the member's JSON
  std::string message;
};

class Fp8ConfigCatalogTest : public ::testing::TestWithParam<ConfigCase> {};

TEST_P(Fp8ConfigCatalogTest, IsRefusedNamingConfigAndField) {
  TempDir dir;
  WriteBytes(dir.File("config.json"),
             ConfigWith(absl::StrCat("\"quantization_config\": ",
                                     GetParam().quantization)));
  auto config = LoadModelConfig(dir.path());
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(Message(config.status()),
              HasSubstr(absl::StrCat("config.json: ", GetParam().message)));
}

INSTANTIATE_TEST_SUITE_P(
    Refusals, Fp8ConfigCatalogTest,
    ::testing::Values(
        ConfigCase{"unknown_method",
                   R"({"quant_method": "awq", "weight_block_size": [128, 128]})",
                   "quantization_config.quant_method = \"awq\" is not "
                   "supported (only \"fp8\""},
        ConfigCase{"missing_method", R"({"weight_block_size": [128, 128]})",
                   "quantization_config.quant_method is missing"},
        ConfigCase{"e5m2",
                   R"({"quant_method": "fp8", "fmt": "e5m2",
                       "weight_block_size": [128, 128]})",
                   "quantization_config.fmt = \"e5m2\" is not supported"},
        ConfigCase{"static_activations",
                   R"({"quant_method": "fp8", "activation_scheme": "static",
                       "weight_block_size": [128, 128]})",
                   "quantization_config.activation_scheme = \"static\" is not "
                   "supported"},
        ConfigCase{"block_64",
                   R"({"quant_method": "fp8", "weight_block_size": [64, 64]})",
                   "quantization_config.weight_block_size = [64, 64] is not "
                   "supported (only [128, 128])"},
        ConfigCase{"block_one_number",
                   R"({"quant_method": "fp8", "weight_block_size": [128]})",
                   "quantization_config.weight_block_size = [128] is not "
                   "supported"},
        ConfigCase{"per_tensor",
                   R"({"quant_method": "fp8"})",
                   "quantization_config.weight_block_size is missing: "
                   "per-tensor FP8"},
        ConfigCase{"block_not_ints",
                   R"({"quant_method": "fp8", "weight_block_size": "128"})",
                   "quantization_config.weight_block_size = \"128\""},
        ConfigCase{"not_converted_not_strings",
                   R"({"quant_method": "fp8", "weight_block_size": [128, 128],
                       "modules_to_not_convert": [1]})",
                   "quantization_config.modules_to_not_convert"},
        ConfigCase{"ignored_layers_empty_name",
                   R"({"quant_method": "fp8", "weight_block_size": [128, 128],
                       "ignored_layers": [""]})",
                   "quantization_config.ignored_layers"},
        ConfigCase{"not_an_object", R"([1])", "quantization_config = [1]"}),
    [](const auto& info) { return info.param.label; });

TEST(QuantizationConfigTest, NotConvertedMatchesAsTransformers) {
  QuantizationConfig q;
  q.modules_to_not_convert = {"layers.*.mlp.gate_proj", "in_proj_b",
                              "model.layers.3.self_attn"};
  EXPECT_TRUE(q.IsNotConverted("lm_head.weight"));  // always
  EXPECT_TRUE(q.IsNotConverted("model.layers.12.mlp.gate_proj.weight"));
  EXPECT_TRUE(q.IsNotConverted("model.layers.0.linear_attn.in_proj_b.weight"));
  EXPECT_TRUE(q.IsNotConverted("model.layers.3.self_attn.q_proj.weight"));
  EXPECT_FALSE(q.IsNotConverted("model.layers.2.self_attn.q_proj.weight"));
  EXPECT_FALSE(q.IsNotConverted("model.layers.12.mlp.up_proj.weight"));
}

}  // namespace
}  // namespace tributary

#include "engine/model/model_config.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/test_files.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

// The published 27B config as reconstructed in model-spec §1.2.
std::string Config27B(absl::string_view extra_text_fields = "") {
  std::string layer_types;
  for (int i = 0; i < 64; ++i) {
    absl::StrAppend(&layer_types, i == 0 ? "" : ",",
                    (i + 1) % 4 == 0 ? "\"full_attention\""
                                     : "\"linear_attention\"");
  }
  return absl::StrCat(R"({
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5", "tie_word_embeddings": false,
    "image_token_id": 248056, "video_token_id": 248057,
    "text_config": {
      "model_type": "qwen3_5_text", "hidden_size": 5120,
      "intermediate_size": 17408, "num_hidden_layers": 64,
      "layer_types": [)",
                      layer_types, R"(], "full_attention_interval": 4,
      "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256,
      "attention_bias": false, "attn_output_gate": true,
      "linear_num_key_heads": 16, "linear_num_value_heads": 48,
      "linear_key_head_dim": 128, "linear_value_head_dim": 128,
      "linear_conv_kernel_dim": 4, "hidden_act": "silu",
      "rms_norm_eps": 1e-06,
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000000,
        "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10],
        "mrope_interleaved": true},
      "partial_rotary_factor": 0.25, "max_position_embeddings": 262144,
      "vocab_size": 248320, "tie_word_embeddings": false,
      "mamba_ssm_dtype": "float32", "mtp_num_hidden_layers": 1,
      "eos_token_id": 248044, "dtype": "bfloat16")",
                      extra_text_fields, R"(},
    "vision_config": {"depth": 27, "hidden_size": 1152}})");
}

TEST(ModelConfigTest, Parses27B) {
  auto c = ParseModelConfig(Config27B(), "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layout, ModelLayout::kQwen3_5);
  EXPECT_EQ(c->weights_prefix(), "model.language_model.");
  EXPECT_EQ(c->hidden_size, 5120);
  EXPECT_EQ(c->num_hidden_layers, 64);
  EXPECT_EQ(c->num_full_attention_layers(), 16);
  EXPECT_EQ(c->num_linear_attention_layers(), 48);
  EXPECT_EQ(c->layer_types[3], LayerKind::kFullAttention);
  EXPECT_EQ(c->layer_types[4], LayerKind::kLinearAttention);
  EXPECT_DOUBLE_EQ(c->rope_theta, 1e7);
  EXPECT_EQ(c->rotary_dim(), 64);
  EXPECT_EQ(c->q_proj_rows(), 12288);
  EXPECT_EQ(c->kv_proj_rows(), 1024);
  EXPECT_EQ(c->attention_output_dim(), 6144);
  EXPECT_EQ(c->num_queries_per_kv_head(), 6);
  EXPECT_DOUBLE_EQ(c->attention_scale(), 1.0 / 16);
  EXPECT_EQ(c->linear_key_dim(), 2048);
  EXPECT_EQ(c->linear_value_dim(), 6144);
  EXPECT_EQ(c->linear_conv_dim(), 10240);
  EXPECT_EQ(c->linear_value_heads_per_key_head(), 3);
  EXPECT_EQ(c->kv_cache_bytes_per_token(), 65536);
  EXPECT_EQ(c->gdn_state_bytes_per_sequence(), 150994944);
  EXPECT_EQ(c->gdn_conv_state_bytes_per_sequence(), 2949120);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{248044}));
  EXPECT_EQ(c->mrope_section, (std::vector<int64_t>{11, 11, 10}));
  EXPECT_TRUE(c->mrope_interleaved);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->dtype, "bfloat16");
  EXPECT_EQ(c->mamba_ssm_dtype, "float32");
  EXPECT_EQ(c->mtp_num_hidden_layers, 1);
}

TEST(ModelConfigTest, FlatLayoutAndClassDefaults) {
  auto c = ParseModelConfig(R"({"model_type": "qwen3_5_text"})", "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layout, ModelLayout::kQwen3_5Text);
  EXPECT_EQ(c->weights_prefix(), "model.");
  // transformers' Qwen3_5TextConfig defaults (model-spec §1.1).
  EXPECT_EQ(c->vocab_size, 248320);
  EXPECT_EQ(c->hidden_size, 4096);
  EXPECT_EQ(c->intermediate_size, 12288);
  EXPECT_EQ(c->num_hidden_layers, 32);
  EXPECT_EQ(c->num_attention_heads, 16);
  EXPECT_EQ(c->num_key_value_heads, 4);
  EXPECT_EQ(c->head_dim, 256);
  EXPECT_EQ(c->linear_num_key_heads, 16);
  EXPECT_EQ(c->linear_num_value_heads, 32);
  EXPECT_EQ(c->linear_key_head_dim, 128);
  EXPECT_EQ(c->linear_value_head_dim, 128);
  EXPECT_EQ(c->linear_conv_kernel_dim, 4);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-6);
  EXPECT_EQ(c->max_position_embeddings, 32768);
  EXPECT_EQ(c->hidden_act, "silu");
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c->partial_rotary_factor, 0.25);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_TRUE(c->eos_token_ids.empty());
  // Layer kinds from full_attention_interval 4.
  ASSERT_EQ(c->layer_types.size(), 32u);
  EXPECT_EQ(c->num_full_attention_layers(), 8);
  EXPECT_EQ(c->layer_types[7], LayerKind::kFullAttention);
}

TEST(ModelConfigTest, LayerKindsFromInterval) {
  auto c = ParseModelConfig(
      R"({"model_type": "qwen3_5_text", "num_hidden_layers": 6,
          "full_attention_interval": 3})",
      "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<LayerKind> expected = {
      LayerKind::kLinearAttention, LayerKind::kLinearAttention,
      LayerKind::kFullAttention,   LayerKind::kLinearAttention,
      LayerKind::kLinearAttention, LayerKind::kFullAttention};
  EXPECT_EQ(c->layer_types, expected);
}

TEST(ModelConfigTest, RopePrecedence) {
  // rope_parameters wins over the top level.
  auto both = ParseModelConfig(
      R"({"model_type": "qwen3_5_text", "rope_theta": 5,
          "partial_rotary_factor": 0.5,
          "rope_parameters": {"rope_theta": 7, "partial_rotary_factor": 0.125}})",
      "config.json");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_DOUBLE_EQ(both->rope_theta, 7);
  EXPECT_DOUBLE_EQ(both->partial_rotary_factor, 0.125);
  EXPECT_EQ(both->rotary_dim(), 32);
  // Then the top level.
  auto top = ParseModelConfig(
      R"({"model_type": "qwen3_5_text", "rope_theta": 5,
          "partial_rotary_factor": 0.5, "rope_parameters": {}})",
      "config.json");
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_DOUBLE_EQ(top->rope_theta, 5);
  EXPECT_EQ(top->rotary_dim(), 128);
}

TEST(ModelConfigTest, TieAndEosPrecedence) {
  // tie: text_config first, then top level.
  auto from_text = ParseModelConfig(
      R"({"model_type": "qwen3_5", "tie_word_embeddings": false,
          "text_config": {"tie_word_embeddings": true}})",
      "config.json");
  ASSERT_TRUE(from_text.ok()) << from_text.status();
  EXPECT_TRUE(from_text->tie_word_embeddings);
  auto from_top = ParseModelConfig(
      R"({"model_type": "qwen3_5", "tie_word_embeddings": true,
          "eos_token_id": [1, 2], "text_config": {"eos_token_id": 3}})",
      "config.json");
  ASSERT_TRUE(from_top.ok()) << from_top.status();
  EXPECT_TRUE(from_top->tie_word_embeddings);
  // eos: the top level first (transformers' from_model_config).
  EXPECT_EQ(from_top->eos_token_ids, (std::vector<int64_t>{1, 2}));
  auto eos_text = ParseModelConfig(
      R"({"model_type": "qwen3_5", "text_config": {"eos_token_id": 3}})",
      "config.json");
  EXPECT_EQ(eos_text->eos_token_ids, (std::vector<int64_t>{3}));
}

TEST(ModelConfigTest, NestedLayoutIgnoresTopLevelDecoderFields) {
  auto c = ParseModelConfig(
      R"({"model_type": "qwen3_5", "hidden_size": 1, "text_config": {}})",
      "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hidden_size, 4096);
}

TEST(ModelConfigTest, NullMeansAbsent) {
  auto c = ParseModelConfig(
      R"({"model_type": "qwen3_5_text", "head_dim": null,
          "rope_scaling": null, "layer_types": null})",
      "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 256);
}

struct BadConfigCase {
  std::string name;
  std::string json;
  std::string expected_message;
};

std::string Flat(absl::string_view fields) {
  return absl::StrCat(R"({"model_type": "qwen3_5_text")",
                      fields.empty() ? "" : ", ", fields, "}");
}
std::string Nested(absl::string_view fields) {
  return absl::StrCat(R"({"model_type": "qwen3_5", "text_config": {)", fields,
                      "}}");
}

std::vector<BadConfigCase> BadConfigs() {
  return {
      {"not_json", "{", "config.json: invalid JSON"},
      {"not_object", "[]", "config.json: top level is an array"},
      {"duplicate_key", Flat(R"("hidden_size": 8, "hidden_size": 16)"),
       "duplicate key \"hidden_size\""},
      {"missing_model_type", "{}", "config.json: model_type is missing"},
      {"unknown_model_type", R"({"model_type": "llama"})",
       "model_type = \"llama\" is not supported"},
      {"nested_without_text_config", R"({"model_type": "qwen3_5"})",
       "text_config is missing"},
      {"text_config_not_object",
       R"({"model_type": "qwen3_5", "text_config": 3})",
       "text_config = 3 is an integer, expected an object"},
      {"inner_model_type", Nested(R"("model_type": "qwen3_next")"),
       "text_config.model_type = \"qwen3_next\" is not \"qwen3_5_text\""},
      {"kv_heads_do_not_divide", Nested(R"("num_attention_heads": 24,
                                          "num_key_value_heads": 5)"),
       "config.json: text_config.num_key_value_heads = 5 does not divide "
       "num_attention_heads = 24"},
      {"linear_heads_do_not_divide",
       Flat(R"("linear_num_key_heads": 16, "linear_num_value_heads": 40)"),
       "linear_num_key_heads = 16 does not divide linear_num_value_heads = 40"},
      {"zero_hidden", Nested(R"("hidden_size": 0)"),
       "text_config.hidden_size = 0 must be positive"},
      {"negative_vocab", Flat(R"("vocab_size": -5)"),
       "vocab_size = -5 must be positive"},
      {"huge_size", Flat(R"("intermediate_size": 4294967296)"),
       "intermediate_size = 4294967296 exceeds"},
      {"too_many_layers", Flat(R"("num_hidden_layers": 1000000)"),
       "num_hidden_layers = 1000000 exceeds 65536"},
      {"size_is_string", Flat(R"("hidden_size": "5120")"),
       "hidden_size = \"5120\" is a string, expected a 64-bit integer"},
      {"size_is_float", Flat(R"("hidden_size": 5120.0)"),
       "hidden_size = 5120.0 is a floating-point number"},
      {"size_is_bool", Flat(R"("head_dim": true)"), "head_dim = true"},
      {"unknown_activation", Nested(R"("hidden_act": "gelu")"),
       "text_config.hidden_act = \"gelu\" is not supported (only \"silu\")"},
      {"eps_zero", Flat(R"("rms_norm_eps": 0)"),
       "rms_norm_eps = 0 must be positive and finite"},
      {"eps_negative", Flat(R"("rms_norm_eps": -1e-6)"), "rms_norm_eps = -1e-06"},
      {"eps_overflows", Flat(R"("rms_norm_eps": 1e999)"),
       "number overflow parsing '1e999'"},
      {"eps_not_number", Flat(R"("rms_norm_eps": "1e-6")"),
       "rms_norm_eps = \"1e-6\" is a string, expected a number"},
      {"theta_zero", Flat(R"("rope_parameters": {"rope_theta": 0})"),
       "rope_theta = 0 must be positive"},
      {"rotary_not_integer",
       Flat(R"("head_dim": 256, "partial_rotary_factor": 0.3)"),
       "gives rotary dim head_dim * factor = 76.8, not a positive even "
       "integer"},
      {"rotary_odd",
       Flat(R"("head_dim": 6, "rope_parameters": {"partial_rotary_factor": 0.5})"),
       "rotary dim head_dim * factor = 3"},
      {"rotary_factor_above_one", Flat(R"("partial_rotary_factor": 2)"),
       "partial_rotary_factor = 2 must be in (0, 1]"},
      {"rotary_factor_zero", Flat(R"("partial_rotary_factor": 0)"),
       "partial_rotary_factor = 0 must be in (0, 1]"},
      {"layer_types_wrong_length",
       Flat(R"("num_hidden_layers": 3, "layer_types": ["linear_attention"])"),
       "layer_types = <1 entries> does not match num_hidden_layers = 3"},
      {"layer_types_unknown_kind",
       Nested(R"("num_hidden_layers": 2,
                 "layer_types": ["linear_attention", "sliding_attention"])"),
       "text_config.layer_types[1] = \"sliding_attention\" is not"},
      {"layer_types_not_list", Flat(R"("layer_types": "full_attention")"),
       "layer_types = \"full_attention\" is a string, expected a list"},
      {"interval_zero", Flat(R"("full_attention_interval": 0)"),
       "full_attention_interval = 0 must be positive"},
      {"attention_bias", Flat(R"("attention_bias": true)"),
       "attention_bias = true is not supported"},
      {"yarn_rope", Flat(R"("rope_parameters": {"rope_type": "yarn"})"),
       "rope_parameters.rope_type = \"yarn\" is not supported"},
      {"legacy_rope_scaling",
       Flat(R"("rope_scaling": {"type": "linear", "factor": 2})"),
       "rope_scaling.type = \"linear\" is not supported"},
      {"eos_not_int", Flat(R"("eos_token_id": "</s>")"),
       "eos_token_id = \"</s>\" is a string"},
      {"eos_list_with_string", Flat(R"("eos_token_id": [1, "x"])"),
       "eos_token_id = [1,\"x\"] has element 1"},
      {"eos_outside_vocab", Flat(R"("vocab_size": 10, "eos_token_id": 10)"),
       "eos_token_id 10 is outside [0, vocab_size = 10)"},
      {"tie_not_bool", Nested(R"("tie_word_embeddings": 0)"),
       "text_config.tie_word_embeddings = 0 is an integer, expected true or "
       "false"},
      {"overflowing_derived",
       Flat(R"("num_hidden_layers": 65536, "linear_num_value_heads": 2000000000,
               "linear_num_key_heads": 1, "linear_key_head_dim": 2000000000,
               "linear_value_head_dim": 2000000000)"),
       "derived quantities overflow 64 bits"},
  };
}

void PrintTo(const BadConfigCase& c, std::ostream* os) { *os << c.name; }

class BadConfigTest : public ::testing::TestWithParam<BadConfigCase> {};

TEST_P(BadConfigTest, IsRejectedNamingFieldAndValue) {
  auto c = ParseModelConfig(GetParam().json, "config.json");
  ASSERT_FALSE(c.ok()) << GetParam().name << " was accepted";
  EXPECT_THAT(Message(c.status()), HasSubstr(GetParam().expected_message));
  EXPECT_THAT(Message(c.status()), ::testing::StartsWith("config.json"));
}

INSTANTIATE_TEST_SUITE_P(
    Catalog, BadConfigTest, ::testing::ValuesIn(BadConfigs()),
    [](const ::testing::TestParamInfo<BadConfigCase>& info) {
      return info.param.name;
    });

TEST(ModelConfigTest, UnsupportedFeaturesAreUnimplemented) {
  EXPECT_EQ(ParseModelConfig(Flat(R"("attention_bias": true)"), "c")
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ParseModelConfig(R"({"model_type": "qwen3_next"})", "c")
                .status()
                .code(),
            absl::StatusCode::kUnimplemented);
}

TEST(ModelConfigTest, LoadModelConfigNamesTheFile) {
  testing::TempDir dir;
  auto missing = LoadModelConfig(dir.path());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(missing.status()), HasSubstr("config.json"));
  testing::WriteBytes(dir.File("config.json"), Flat(R"("hidden_size": 0)"));
  auto bad = LoadModelConfig(dir.path());
  EXPECT_THAT(Message(bad.status()),
              HasSubstr(dir.File("config.json") + ": hidden_size = 0"));
}

}  // namespace
}  // namespace tributary

#include "engine/model/model_weights.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/model_directory.h"
#include "engine/model/stop_tokens.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/test_files.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::tributary::testing::BuildSafetensors;
using ::tributary::testing::TempDir;
using ::tributary::testing::TestTensor;
using ::tributary::testing::TinyConfigJson;
using ::tributary::testing::TinyModelOptions;
using ::tributary::testing::TinyModelTensors;
using ::tributary::testing::WriteBytes;
using ::tributary::testing::WriteTinyModel;

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

void CheckTinyModel(const ModelDirectory& model, bool tied) {
  const ModelWeights& w = model.weights();
  const std::string p = model.config().weights_prefix();
  EXPECT_EQ(w.embed_tokens.name, p + "embed_tokens.weight");
  EXPECT_EQ(w.embed_tokens.shape, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(w.final_norm.name, p + "norm.weight");
  EXPECT_EQ(w.tied_embeddings, tied);
  if (tied) {
    EXPECT_EQ(w.lm_head.data, w.embed_tokens.data);
  } else {
    EXPECT_EQ(w.lm_head.name, "lm_head.weight");
    EXPECT_NE(w.lm_head.data, w.embed_tokens.data);
  }
  ASSERT_EQ(w.layers.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    const LayerWeights& layer = w.layers[i];
    EXPECT_EQ(layer.kind, LayerKind::kLinearAttention);
    ASSERT_TRUE(layer.linear_attention.has_value());
    EXPECT_FALSE(layer.attention.has_value());
    EXPECT_EQ(layer.linear_attention->in_proj_qkv.name,
              absl::StrCat(p, "layers.", i, ".linear_attn.in_proj_qkv.weight"));
    EXPECT_EQ(layer.linear_attention->conv1d.shape,
              (std::vector<int64_t>{16, 1, 4}));
    EXPECT_EQ(layer.linear_attention->a_log.dtype, DType::kF32);
    EXPECT_EQ(layer.linear_attention->a_log.name,
              absl::StrCat(p, "layers.", i, ".linear_attn.A_log"));
  }
  const LayerWeights& attn = w.layers[3];
  EXPECT_EQ(attn.kind, LayerKind::kFullAttention);
  ASSERT_TRUE(attn.attention.has_value());
  EXPECT_FALSE(attn.linear_attention.has_value());
  EXPECT_EQ(attn.attention->q_proj.shape, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(attn.attention->o_proj.shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(attn.mlp.down_proj.shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(attn.input_layernorm.size_bytes, 16u);
  // The data pointer is the right bytes of the mapping.
  const TensorView* stored = model.tensors().Find(attn.mlp.up_proj.name);
  ASSERT_NE(stored, nullptr);
  EXPECT_EQ(attn.mlp.up_proj.data, stored->data);
}

struct LayoutCase {
  bool nested;
  bool tied;
};

class TinyModelLayoutTest : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(TinyModelLayoutTest, LoadsAndResolvesEveryTensor) {
  TempDir dir;
  TinyModelOptions options;
  options.nested = GetParam().nested;
  options.tied = GetParam().tied;
  options.write_lm_head = !GetParam().tied;
  WriteTinyModel(dir.path(), options);
  auto model = ModelDirectory::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->config().layout, options.nested ? ModelLayout::kQwen3_5
                                                   : ModelLayout::kQwen3_5Text);
  CheckTinyModel(*model, options.tied);
  EXPECT_THAT(model->warnings(), IsEmpty());
  EXPECT_EQ(model->tensors().tensors().size(), options.tied ? 55u : 56u);
  // No generation_config.json: stop tokens from config.json.
  EXPECT_FALSE(model->generation_config().has_value());
  EXPECT_EQ(model->stop_tokens().source, StopTokenSource::kModelConfig);
  EXPECT_EQ(model->stop_tokens().token_ids, (std::vector<int64_t>{31}));
}

INSTANTIATE_TEST_SUITE_P(Layouts, TinyModelLayoutTest,
                         ::testing::Values(LayoutCase{true, false},
                                           LayoutCase{true, true},
                                           LayoutCase{false, false},
                                           LayoutCase{false, true}),
                         [](const auto& info) {
                           return absl::StrCat(
                               info.param.nested ? "Nested" : "Flat",
                               info.param.tied ? "Tied" : "Untied");
                         });

TEST(ModelWeightsTest, VisionAndMtpAreIgnoredSilently) {
  TempDir dir;
  TinyModelOptions options;
  options.add_vision_and_mtp = true;
  WriteTinyModel(dir.path(), options);
  auto model = ModelDirectory::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_THAT(model->warnings(), IsEmpty());
  CheckTinyModel(*model, /*tied=*/false);
}

TEST(ModelWeightsTest, ExtraTensorsAreListedAsWarnings) {
  TempDir dir;
  TinyModelOptions options;
  std::vector<TestTensor> tensors = TinyModelTensors(options);
  tensors.push_back({"model.language_model.layers.0.mlp.extra.bias", "F32",
                     {8}, ""});
  tensors.push_back({"model.embed_tokens.weight", "BF16", {32, 8}, ""});
  WriteBytes(dir.File("config.json"), TinyConfigJson(options));
  WriteBytes(dir.File("model.safetensors"), BuildSafetensors(tensors));
  auto model = ModelDirectory::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::string> warnings = model->warnings();
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[0],
              HasSubstr("tensor \"model.embed_tokens.weight\" is not used"));
  EXPECT_THAT(warnings[1], HasSubstr("layers.0.mlp.extra.bias"));
}

TEST(ModelWeightsTest, WrongShapeNamesTensorAndBothShapes) {
  TempDir dir;
  TinyModelOptions options;
  std::vector<TestTensor> tensors = TinyModelTensors(options);
  for (TestTensor& t : tensors) {
    if (t.name == "model.language_model.layers.3.self_attn.q_proj.weight") {
      t.shape = {16, 8};  // No gate half.
    }
  }
  WriteBytes(dir.File("config.json"), TinyConfigJson(options));
  WriteBytes(dir.File("model.safetensors"), BuildSafetensors(tensors));
  auto model = ModelDirectory::Load(dir.path());
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(Message(model.status()),
              HasSubstr("model.safetensors: tensor "
                        "\"model.language_model.layers.3.self_attn.q_proj."
                        "weight\" has shape [16, 8], expected [32, 8] = [2 * "
                        "num_attention_heads * head_dim, hidden_size]"));
}

TEST(ModelWeightsTest, WrongDTypeIsNamed) {
  TempDir dir;
  TinyModelOptions options;
  std::vector<TestTensor> tensors = TinyModelTensors(options);
  tensors[0].dtype = "I16";  // embed_tokens
  WriteBytes(dir.File("config.json"), TinyConfigJson(options));
  WriteBytes(dir.File("model.safetensors"), BuildSafetensors(tensors));
  auto model = ModelDirectory::Load(dir.path());
  EXPECT_THAT(Message(model.status()),
              HasSubstr("\"model.language_model.embed_tokens.weight\" has "
                        "dtype I16; the decoder needs BF16, F16 or F32"));
}

TEST(ModelWeightsTest, MissingTensorsAreListedWithCount) {
  TempDir dir;
  TinyModelOptions options;
  std::vector<TestTensor> tensors;
  for (const TestTensor& t : TinyModelTensors(options)) {
    if (t.name.find("layers.1.") == std::string::npos &&
        t.name != "model.language_model.norm.weight") {
      tensors.push_back(t);
    }
  }
  WriteBytes(dir.File("config.json"), TinyConfigJson(options));
  WriteBytes(dir.File("model.safetensors"), BuildSafetensors(tensors));
  auto model = ModelDirectory::Load(dir.path());
  ASSERT_FALSE(model.ok());
  const std::string message = Message(model.status());
  EXPECT_THAT(message, HasSubstr("missing 15 tensors"));
  EXPECT_THAT(message,
              HasSubstr("model.language_model.layers.1.input_layernorm.weight"));
  EXPECT_THAT(message, HasSubstr("... and 5 more"));
}

TEST(ModelWeightsTest, LayoutMismatchGetsAHint) {
  TempDir dir;
  TinyModelOptions flat;
  flat.nested = false;
  TinyModelOptions nested;
  WriteBytes(dir.File("config.json"), TinyConfigJson(nested));
  WriteBytes(dir.File("model.safetensors"),
             BuildSafetensors(TinyModelTensors(flat)));
  auto model = ModelDirectory::Load(dir.path());
  EXPECT_THAT(Message(model.status()),
              HasSubstr("the checkpoint has tensors under \"model.\""));
}

TEST(ModelWeightsTest, UntiedWithoutLmHeadIsAnError) {
  TempDir dir;
  TinyModelOptions options;
  options.tied = false;
  options.write_lm_head = false;
  WriteTinyModel(dir.path(), options);
  auto model = ModelDirectory::Load(dir.path());
  EXPECT_THAT(Message(model.status()),
              HasSubstr("no lm_head.weight but config.json sets "
                        "tie_word_embeddings = false"));
}

TEST(ModelWeightsTest, TiedWithLmHeadUsesEmbeddingAndWarns) {
  TempDir dir;
  TinyModelOptions options;
  options.tied = true;
  options.write_lm_head = true;
  WriteTinyModel(dir.path(), options);
  auto model = ModelDirectory::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE(model->weights().tied_embeddings);
  EXPECT_EQ(model->weights().lm_head.data, model->weights().embed_tokens.data);
  ASSERT_EQ(model->warnings().size(), 1u);
  EXPECT_THAT(model->warnings()[0],
              HasSubstr("lm_head.weight is present but tie_word_embeddings = "
                        "true: it is ignored"));
}

TEST(ModelWeightsTest, ShardedCheckpointWithTwoShards) {
  TempDir dir;
  TinyModelOptions options;
  options.add_vision_and_mtp = true;
  std::vector<TestTensor> all = TinyModelTensors(options);
  std::vector<TestTensor> first(all.begin(), all.begin() + all.size() / 2);
  std::vector<TestTensor> second(all.begin() + all.size() / 2, all.end());
  WriteBytes(dir.File("config.json"), TinyConfigJson(options));
  WriteBytes(dir.File("model-00001-of-00002.safetensors"),
             BuildSafetensors(first));
  WriteBytes(dir.File("model-00002-of-00002.safetensors"),
             BuildSafetensors(second));
  std::string weight_map;
  for (size_t i = 0; i < all.size(); ++i) {
    absl::StrAppend(&weight_map, i == 0 ? "" : ",", "\"", all[i].name,
                    "\": \"model-0000", i < first.size() ? 1 : 2,
                    "-of-00002.safetensors\"");
  }
  WriteBytes(dir.File("model.safetensors.index.json"),
             absl::StrCat("{\"metadata\": {}, \"weight_map\": {", weight_map,
                          "}}"));
  auto model = ModelDirectory::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->tensors().files().size(), 2u);
  CheckTinyModel(*model, /*tied=*/false);
  EXPECT_THAT(model->warnings(), IsEmpty());

  // An index naming a shard that does not exist.
  WriteBytes(dir.File("model.safetensors.index.json"),
             absl::StrCat("{\"weight_map\": {", weight_map,
                          ", \"x\": \"model-00003-of-00003.safetensors\"}}"));
  auto broken = ModelDirectory::Load(dir.path());
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(broken.status()),
              HasSubstr("model-00003-of-00003.safetensors"));
}

TEST(ModelDirectoryTest, StopTokenPrecedence) {
  TempDir dir;
  TinyModelOptions options;
  WriteTinyModel(dir.path(), options);
  WriteBytes(dir.File("tokenizer_config.json"),
             R"({"eos_token": {"content": "<|im_end|>", "lstrip": false}})");
  // generation_config.json wins over config.json.
  WriteBytes(dir.File("generation_config.json"),
             R"({"eos_token_id": [30, 29], "temperature": 0.6, "top_k": 20})");
  auto model = ModelDirectory::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->stop_tokens().source, StopTokenSource::kGenerationConfig);
  EXPECT_EQ(model->stop_tokens().token_ids, (std::vector<int64_t>{30, 29}));
  ASSERT_TRUE(model->generation_config().has_value());
  EXPECT_DOUBLE_EQ(model->generation_config()->temperature.value(), 0.6);
  EXPECT_EQ(model->generation_config()->top_k.value(), 20);

  // generation_config.json without eos: config.json's.
  WriteBytes(dir.File("generation_config.json"), R"({"eos_token_id": 7})");
  model = ModelDirectory::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->stop_tokens().token_ids, (std::vector<int64_t>{7}));
  WriteBytes(dir.File("generation_config.json"), R"({"do_sample": true})");
  model = ModelDirectory::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->stop_tokens().source, StopTokenSource::kModelConfig);
  EXPECT_EQ(model->stop_tokens().token_ids, (std::vector<int64_t>{31}));

  // No ids anywhere: the tokenizer's eos_token text, for the caller.
  std::string config = TinyConfigJson(options);
  config.replace(config.find("\"eos_token_id\": 31"), 18, "\"bos_token_id\": 1");
  WriteBytes(dir.File("config.json"), config);
  model = ModelDirectory::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->stop_tokens().source, StopTokenSource::kTokenizerConfig);
  EXPECT_TRUE(model->stop_tokens().token_ids.empty());
  EXPECT_EQ(model->stop_tokens().eos_token_text, "<|im_end|>");

  // Nothing at all.
  std::remove(dir.File("tokenizer_config.json").c_str());
  model = ModelDirectory::Load(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->stop_tokens().source, StopTokenSource::kNone);
}

TEST(ModelDirectoryTest, ErrorsNameTheFile) {
  TempDir dir;
  TinyModelOptions options;
  WriteTinyModel(dir.path(), options);
  WriteBytes(dir.File("generation_config.json"), R"({"eos_token_id": 99})");
  auto model = ModelDirectory::Load(dir.path());
  EXPECT_THAT(Message(model.status()),
              HasSubstr("generation_config.json: eos_token_id 99 is outside "
                        "[0, vocab_size = 32)"));
  WriteBytes(dir.File("generation_config.json"), R"({"top_k": -1})");
  model = ModelDirectory::Load(dir.path());
  EXPECT_THAT(Message(model.status()),
              HasSubstr("generation_config.json: top_k = -1"));
  std::remove(dir.File("generation_config.json").c_str());
  std::remove(dir.File("model.safetensors").c_str());
  model = ModelDirectory::Load(dir.path());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(model.status()), HasSubstr("model.safetensors"));
  std::remove(dir.File("config.json").c_str());
  model = ModelDirectory::Load(dir.path());
  EXPECT_THAT(Message(model.status()), HasSubstr("config.json"));
  model = ModelDirectory::Load(dir.File("no_such_dir"));
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
}

TEST(ModelDirectoryTest, SurvivesMoves) {
  TempDir dir;
  WriteTinyModel(dir.path(), TinyModelOptions{});
  auto model = LoadModel(dir.path());
  ASSERT_TRUE(model.ok()) << model.status();
  const void* data = model->weights().layers[3].attention->q_proj.data;
  ModelDirectory moved = *std::move(model);
  EXPECT_EQ(moved.weights().layers[3].attention->q_proj.data, data);
  EXPECT_EQ(moved.tensors().Find("lm_head.weight")->data,
            moved.weights().lm_head.data);
}

}  // namespace
}  // namespace tributary

namespace tributary {
namespace {

TEST(ResolveStopTokenIdsTest, AddsTheEosTextOnlyWhenTheTokenizerKnowsIt) {
  StopTokens stop;
  stop.token_ids = {7, 9};
  bool unresolved = true;
  EXPECT_EQ(ResolveStopTokenIds(stop, nullptr, &unresolved),
            (std::vector<int32_t>{7, 9}));
  EXPECT_FALSE(unresolved);

  stop.eos_token_text = "<|im_end|>";
  auto lookup = [](absl::string_view text) -> std::optional<int32_t> {
    if (text == "<|im_end|>") return 42;
    return std::nullopt;
  };
  EXPECT_EQ(ResolveStopTokenIds(stop, lookup, &unresolved),
            (std::vector<int32_t>{7, 9, 42}));
  EXPECT_FALSE(unresolved);
  EXPECT_EQ(ResolveStopTokenIds(stop, nullptr, &unresolved),
            (std::vector<int32_t>{7, 9}));
  EXPECT_TRUE(unresolved);
  stop.eos_token_text = "<|unknown|>";
  EXPECT_EQ(ResolveStopTokenIds(stop, lookup, &unresolved),
            (std::vector<int32_t>{7, 9}));
  EXPECT_TRUE(unresolved);
}

}  // namespace
}  // namespace tributary

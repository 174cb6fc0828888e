// Synthetic models: the presets have the published shapes (parameter counts
// from model-spec §9), and the decoder makes their random weights on the
// backend, deterministically from the seed.
#include "engine/model/synthetic_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/decoder/hybrid_decoder.h"
#include "engine/model/model_directory.h"
#include "engine/model/model_weights.h"

namespace tributary {
namespace {

int64_t ParameterCount(const ModelConfig& config) {
  int64_t total = 0;
  for (const TensorSpec& spec : DecoderTensorSpecs(config)) {
    int64_t n = 1;
    for (int64_t e : spec.shape) n *= e;
    total += n;
  }
  return total;
}

TEST(SyntheticModelTest, The27BHasThePublishedShape) {
  auto config = SyntheticModelConfig("qwen3.5-27b");
  ASSERT_TRUE(config.ok()) << config.status();
  // model-spec §9.1: the text decoder's total.
  EXPECT_EQ(ParameterCount(*config), 26895998464);
  EXPECT_EQ(config->num_full_attention_layers(), 16);
  EXPECT_EQ(config->num_linear_attention_layers(), 48);
  EXPECT_EQ(config->layer_types[3], LayerKind::kFullAttention);
  EXPECT_EQ(config->kv_cache_bytes_per_token(), 65536);
  EXPECT_EQ(config->gdn_state_bytes_per_sequence(), 150994944);
  EXPECT_EQ(config->rotary_dim(), 64);
}

TEST(SyntheticModelTest, EveryPresetIsValidAndUnknownOnesAreNamed) {
  for (const std::string& preset : SyntheticModelPresets()) {
    SCOPED_TRACE(preset);
    auto model = ModelDirectory::Synthetic(preset);
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_TRUE(model->synthetic());
    EXPECT_EQ(model->dir(), "synthetic:" + preset);
    EXPECT_EQ(model->weights().layers.size(),
              static_cast<size_t>(model->config().num_hidden_layers));
    EXPECT_EQ(model->weights().embed_tokens.data, nullptr);
  }
  auto bad = SyntheticModelConfig("qwen3.5-70b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("qwen3.5-70b"), std::string::npos);
  EXPECT_NE(bad.status().message().find("qwen3.5-27b"), std::string::npos);
}

// The logits of every token of a fixed 12-token prompt (ids below 512, the
// tiny vocabulary) prefilled from position 0 in KV block 0, state slot 0.
std::vector<float> PrefillLogits(HybridDecoder& decoder) {
  BatchLayout layout;
  SequenceSlice& s = layout.sequences.emplace_back();
  s.num_tokens = 12;
  s.block_table = {0};
  std::vector<int32_t> ids;
  for (int i = 0; i < 12; ++i) ids.push_back((i * 41 + 5) % 512);
  ForwardOptions all;
  all.logits_for_all_tokens = true;
  auto out = decoder.Forward(layout, ids, all);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->logits : std::vector<float>();
}

// Prefill logits of the tiny synthetic model from `seed` on the CPU.
std::vector<float> TinyLogits(uint64_t seed, int64_t* bytes_reported = nullptr) {
  auto model = ModelDirectory::Synthetic("tiny");
  EXPECT_TRUE(model.ok());
  auto backend = CpuBackend::Create({1});
  EXPECT_TRUE(backend.ok());
  WeightLoadOptions load;
  load.random_seed = seed;
  int64_t last_done = -1, last_total = -1;
  load.progress = [&](int64_t done, int64_t total) {
    EXPECT_GT(done, last_done);
    last_done = done;
    last_total = total;
  };
  auto decoder = HybridDecoder::Create(model->config(), model->weights(),
                                       backend->get(), {8, 16, 1}, load);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  if (!decoder.ok()) return {};
  EXPECT_EQ(last_done, last_total) << "progress ends at the total";
  if (bytes_reported != nullptr) *bytes_reported = last_total;
  return PrefillLogits(**decoder);
}

TEST(SyntheticModelTest, RandomWeightsAreDeterministicAndInScale) {
  int64_t bytes = 0;
  const std::vector<float> a = TinyLogits(7, &bytes);
  const std::vector<float> b = TinyLogits(7);
  const std::vector<float> c = TinyLogits(8);
  ASSERT_EQ(a.size(), 12u * 512u);
  EXPECT_EQ(a, b) << "the same seed gives the same model";
  EXPECT_NE(a, c) << "another seed gives another model";
  // "tiny" keeps f32 weights: 4 bytes each.
  auto config = SyntheticModelConfig("tiny");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(bytes, 4 * ParameterCount(*config));
  // The published shapes are bf16, with A_log and the GDN norm in f32.
  auto big = ModelDirectory::Synthetic("qwen3.5-0.8b");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->weights().embed_tokens.dtype, DType::kBF16);
  EXPECT_EQ(big->weights().layers[0].linear_attention->a_log.dtype, DType::kF32);
  // The logits are finite and neither collapsed nor exploded: the ranges
  // keep a unit-scale stream through the stack.
  double sum_sq = 0;
  for (float x : a) {
    ASSERT_TRUE(std::isfinite(x));
    sum_sq += double{x} * x;
  }
  const double rms = std::sqrt(sum_sq / a.size());
  EXPECT_GT(rms, 0.05);
  EXPECT_LT(rms, 50.0);
}

// With the default f32 products too, every bf16 matmul weight the decoder
// loads is packed (PrepareMatMulWeight), on any CPU: no product runs on
// stored bf16 rows.
TEST(SyntheticModelTest, F32ProductsRunOnPackedWeightsOnly) {
  auto config = SyntheticModelConfig("tiny");
  ASSERT_TRUE(config.ok());
  const ModelWeights weights = SyntheticModelWeights(*config, DType::kBF16);
  auto backend = CpuBackend::Create({1, MatMulPrecision::kF32});
  ASSERT_TRUE(backend.ok());
  WeightLoadOptions load;
  load.random_seed = 7;
  auto decoder = HybridDecoder::Create(*config, weights, backend->get(),
                                       {8, 16, 1}, load);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  EXPECT_FALSE(PrefillLogits(**decoder).empty());
  EXPECT_EQ((*backend)->unprepared_bf16_matmuls(), 0);
}

// A backend that packs its matmul weights (bf16 products) gets the same
// random model: the decoder numbers each tensor's random stream by its load
// order, and the packed copies must not shift it. bf16 weights of the tiny
// shape, bf16 products against f32: the logits within bf16 rounding, where
// a shifted stream would give an unrelated model.
TEST(SyntheticModelTest, PackedWeightsKeepTheRandomModel) {
  if (!MatMulBf16DotSupported()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  auto config = SyntheticModelConfig("tiny");
  ASSERT_TRUE(config.ok());
  const ModelWeights weights = SyntheticModelWeights(*config, DType::kBF16);
  std::vector<std::vector<float>> logits;
  // f32 and bf16 products of seed 7's model, then f32 of seed 8's.
  const std::pair<MatMulPrecision, uint64_t> runs[] = {
      {MatMulPrecision::kF32, 7},
      {MatMulPrecision::kBF16, 7},
      {MatMulPrecision::kF32, 8}};
  for (const auto& [precision, seed] : runs) {
    auto backend = CpuBackend::Create({1, precision});
    ASSERT_TRUE(backend.ok());
    WeightLoadOptions load;
    load.random_seed = seed;
    auto decoder = HybridDecoder::Create(*config, weights, backend->get(),
                                         {8, 16, 1}, load);
    ASSERT_TRUE(decoder.ok()) << decoder.status();
    logits.push_back(PrefillLogits(**decoder));
    EXPECT_EQ((*backend)->unprepared_bf16_matmuls(), 0);
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  ASSERT_EQ(logits[0].size(), logits[2].size());
  ASSERT_FALSE(logits[0].empty());
  float max_ref = 0.0f, max_diff = 0.0f, max_other = 0.0f;
  for (size_t i = 0; i < logits[0].size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(logits[0][i]));
    max_diff = std::max(max_diff, std::fabs(logits[1][i] - logits[0][i]));
    max_other = std::max(max_other, std::fabs(logits[2][i] - logits[0][i]));
  }
  std::printf("max |logit| %g, bf16 products move them by %g, another model "
              "by %g\n", max_ref, max_diff, max_other);
  EXPECT_GT(max_diff, 0.0f);  // the products did change
  // Rounding moves a random model's logits more than a trained one's
  // (~1e-2 of their range here), another model by about their range.
  EXPECT_LE(max_diff, 5e-2f * max_ref);
  EXPECT_GT(max_other, 0.5f * max_ref);  // what a shifted stream looks like
}

}  // namespace
}  // namespace tributary

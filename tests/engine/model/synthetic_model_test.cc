// Synthetic models: the presets have the published shapes (parameter counts
// from model-spec §9), and the decoder makes their random weights on the
// backend, deterministically from the seed.
#include "engine/model/synthetic_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/model/hybrid_decoder.h"
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
  BatchLayout layout;
  SequenceSlice& s = layout.sequences.emplace_back();
  s.num_tokens = 12;
  s.block_table = {0};
  std::vector<int32_t> ids;
  for (int i = 0; i < 12; ++i) ids.push_back((i * 41 + 5) % 512);
  ForwardOptions all;
  all.logits_for_all_tokens = true;
  auto out = (*decoder)->Forward(layout, ids, all);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? out->logits : std::vector<float>();
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

}  // namespace
}  // namespace tributary

// ForwardWork against figures published outside this code: design.md §8's
// 51.25 GB of bf16 weights a 27B decode step reads, and model-spec §9's
// parameter count, state and KV sizes.
#include "engine/decoder/forward_work.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "engine/model/model_weights.h"
#include "engine/model/synthetic_model.h"

namespace tributary {
namespace {

constexpr int64_t kBf16 = 2;

TEST(ForwardWorkTest, The27BMatchesThePublishedFigures) {
  auto config = SyntheticModelConfig("qwen3.5-27b");
  ASSERT_TRUE(config.ok()) << config.status();
  const ModelConfig& c = *config;
  const ForwardWork work =
      ForwardWorkOf(c, SyntheticModelWeights(c), kBf16);

  // design.md §8: 51.25 GB of bf16 weights per decode step (all but the
  // embedding table; A_log and the GDN norm are f32, a few kB more).
  EXPECT_NEAR(static_cast<double>(work.weight_bytes) / 1e9, 51.25, 0.005);

  // model-spec §9.1: 26 895 998 464 text parameters. Less the embedding and
  // lm_head [248 320 × 5120] each, the norms (2 a layer, q/k norms of 256 in
  // the 16 attention layers, the final one), and the GDN's conv
  // [10 240 × 4], dt_bias, A_log [48] and norm [128] in the 48 GDN layers,
  // the rest are the layers' matrices.
  const int64_t table = 248320LL * 5120;
  const int64_t vectors = 64 * 2 * 5120 + 16 * 2 * 256 + 5120 +
                          48 * (10240 * 4 + 48 + 48 + 128);
  EXPECT_EQ(work.lm_head_params, table);
  EXPECT_EQ(work.layer_matrix_params,
            26895998464LL - 2 * table - vectors);

  // model-spec §9: 144 MiB of f32 recurrent state and 2 949 120 B of bf16
  // conv windows per sequence; 64 KiB of bf16 KV per token.
  EXPECT_EQ(work.state_bytes_per_sequence, 150994944 + 2949120);
  EXPECT_EQ(work.kv_bytes_per_token, 65536);

  // 7 flops per recurrent state element (model-spec §4.5's five steps);
  // q·k and p·v of 256 dims for 24 heads in 16 layers.
  EXPECT_EQ(work.delta_rule_flops_per_token, 7 * 150994944 / 4);
  EXPECT_EQ(work.attention_flops_per_key, 16 * 24 * 4 * 256);

  // A step: 3 decodes at positions 9, 19 and 29, one sampling each.
  StepShape step;
  step.sequences = 3;
  step.tokens = 3;
  step.logit_rows = 3;
  step.attended_keys = 10 + 20 + 30;
  step.context_tokens = 10 + 20 + 30;
  EXPECT_DOUBLE_EQ(work.Flops(step),
                   2.0 * 3 * (work.layer_matrix_params + table) +
                       3.0 * work.delta_rule_flops_per_token +
                       60.0 * work.attention_flops_per_key);
  EXPECT_DOUBLE_EQ(work.Bytes(step),
                   static_cast<double>(work.weight_bytes) +
                       3 * 2.0 * work.state_bytes_per_sequence +
                       60.0 * 65536);
}

TEST(ForwardWorkTest, ATiedHeadIsReadOnceAndTheActivationTypeSizesTheCaches) {
  auto config = SyntheticModelConfig("qwen3.5-27b");
  ASSERT_TRUE(config.ok()) << config.status();
  ModelConfig tied = *config;
  tied.tie_word_embeddings = true;
  const ForwardWork untied_work =
      ForwardWorkOf(*config, SyntheticModelWeights(*config), kBf16);
  const ForwardWork tied_work =
      ForwardWorkOf(tied, SyntheticModelWeights(tied), 4);
  // The same head either way: tying only drops the second table.
  EXPECT_EQ(tied_work.weight_bytes, untied_work.weight_bytes);
  EXPECT_EQ(tied_work.lm_head_params, untied_work.lm_head_params);
  EXPECT_EQ(tied_work.layer_matrix_params, untied_work.layer_matrix_params);
  // f32 activations: the KV cache and conv windows double, the f32
  // recurrent state does not.
  EXPECT_EQ(tied_work.kv_bytes_per_token, 2 * 65536);
  EXPECT_EQ(tied_work.state_bytes_per_sequence, 150994944 + 2 * 2949120);
}

}  // namespace
}  // namespace tributary

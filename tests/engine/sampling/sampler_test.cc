#include "engine/sampling/sampler.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

SampleResult SampleOrDie(Sampler& sampler, absl::Span<const float> logits,
                         const SamplingParams& params,
                         const TokenHistory& history, uint64_t seed) {
  absl::StatusOr<SampleResult> result =
      sampler.Sample(logits, params, history, seed);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SampleResult{};
}

std::vector<float> RandomLogits(size_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(vocab);
  for (float& logit : logits) logit = normal(rng);
  return logits;
}

TEST(SamplerTest, GreedyIsArgmaxWithTiesToTheLowestId) {
  SamplingParams params;
  params.temperature = 0.0f;
  Sampler sampler;
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f};
  EXPECT_EQ(SampleOrDie(sampler, logits, params, {}, 1).token_id, 1);
  EXPECT_EQ(SampleOrDie(sampler, logits, params, {}, 2).token_id, 1);
  EXPECT_EQ(Argmax(std::vector<float>{-2.0f, -2.0f}), 0);
  // A temperature below the greedy threshold is greedy too.
  params.temperature = 1e-7f;
  EXPECT_EQ(SampleOrDie(sampler, logits, params, {}, 3).token_id, 1);
}

TEST(SamplerTest, GreedyAppliesPenalties) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.repetition_penalty = 2.0f;
  Sampler sampler;
  const std::vector<float> logits = {3.0f, 2.0f};
  const std::vector<int32_t> output = {0};
  EXPECT_EQ(SampleOrDie(sampler, logits, params, {{}, output}, 0).token_id, 1);
}

TEST(SamplerTest, TopKOfOneIsGreedy) {
  SamplingParams params;
  params.top_k = 1;
  Sampler sampler;
  const std::vector<float> logits = RandomLogits(1000, 3);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    EXPECT_EQ(SampleOrDie(sampler, logits, params, {}, seed).token_id,
              Argmax(logits));
  }
}

TEST(SamplerTest, NonFiniteLogitIsInternalNamingTheId) {
  Sampler sampler;
  SamplingParams params;
  for (float bad : {std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    const std::vector<float> logits = {0.0f, 1.0f, bad, 2.0f};
    const absl::StatusOr<SampleResult> result =
        sampler.Sample(logits, params, {}, 0);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(std::string(result.status().message()),
                HasSubstr("logits[2] = "));
  }
  EXPECT_EQ(sampler.Sample({}, params, {}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SamplerTest, BadHistoryIdWithPenaltiesIsInvalidArgument) {
  Sampler sampler;
  SamplingParams params;
  params.presence_penalty = 1.0f;
  const std::vector<float> logits = {0.0f, 1.0f};
  const std::vector<int32_t> prompt = {5};
  const absl::StatusOr<SampleResult> result =
      sampler.Sample(logits, params, {prompt, {}}, 0);
  // Presence ignores the prompt, but the ids are still checked.
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("prompt_ids[0] = 5"));
}

// log_softmax in double, independently of the code under test.
std::vector<double> LogSoftmax(const std::vector<float>& logits) {
  double max_logit = -INFINITY;
  for (float l : logits) max_logit = std::max<double>(max_logit, l);
  double sum = 0;
  for (float l : logits) sum += std::exp(l - max_logit);
  std::vector<double> result;
  for (float l : logits) result.push_back(l - max_logit - std::log(sum));
  return result;
}

TEST(SamplerTest, LogprobsAreOfTheRawDistribution) {
  const std::vector<float> logits = RandomLogits(5000, 11);
  const std::vector<double> reference = LogSoftmax(logits);
  std::vector<int32_t> by_rank(logits.size());
  for (size_t i = 0; i < by_rank.size(); ++i) by_rank[i] = i;
  std::sort(by_rank.begin(), by_rank.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  const std::vector<int32_t> output = {by_rank[0], by_rank[0], by_rank[1]};

  std::vector<SamplingParams> variants(5);
  variants[1].temperature = 0.0f;
  variants[2].temperature = 0.3f;
  variants[2].top_k = 5;
  variants[3].repetition_penalty = 1.8f;
  variants[3].frequency_penalty = 1.0f;
  variants[3].presence_penalty = 1.0f;
  variants[4].top_p = 0.5f;
  variants[4].min_p = 0.2f;
  Sampler sampler;
  for (size_t v = 0; v < variants.size(); ++v) {
    SCOPED_TRACE(v);
    SamplingParams params = variants[v];
    params.num_logprobs = 20;
    const SampleResult result =
        SampleOrDie(sampler, logits, params, {output, output}, 99);
    ASSERT_TRUE(result.logprob.has_value());
    EXPECT_NEAR(*result.logprob, reference[result.token_id], 1e-5);
    ASSERT_EQ(result.top_logprobs.size(), 20u);
    for (size_t i = 0; i < 20; ++i) {
      EXPECT_EQ(result.top_logprobs[i].token_id, by_rank[i]);
      EXPECT_NEAR(result.top_logprobs[i].logprob, reference[by_rank[i]], 1e-5);
    }
  }
}

TEST(SamplerTest, LogprobsOnlyWhenAsked) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  Sampler sampler;
  SamplingParams params;
  SampleResult result = SampleOrDie(sampler, logits, params, {}, 0);
  EXPECT_FALSE(result.logprob.has_value());
  EXPECT_TRUE(result.top_logprobs.empty());
  params.num_logprobs = 0;  // the chosen token's only
  result = SampleOrDie(sampler, logits, params, {}, 0);
  EXPECT_TRUE(result.logprob.has_value());
  EXPECT_TRUE(result.top_logprobs.empty());
  params.num_logprobs = 20;  // more than the vocabulary
  result = SampleOrDie(sampler, logits, params, {}, 0);
  EXPECT_EQ(result.top_logprobs.size(), 3u);
  EXPECT_EQ(result.top_logprobs[0].token_id, 2);
}

// Generates `num_tokens` tokens for one sequence from logits that depend on
// its history (so a diverging draw changes every later step).
std::vector<int32_t> Generate(Sampler& sampler, const SamplingParams& params,
                              uint64_t seed, int num_tokens) {
  const std::vector<int32_t> prompt = {1, 2, 3};
  std::vector<int32_t> output;
  for (int i = 0; i < num_tokens; ++i) {
    const uint32_t key =
        output.empty() ? 0u : static_cast<uint32_t>(output.back());
    const std::vector<float> logits = RandomLogits(64, key);
    output.push_back(
        SampleOrDie(sampler, logits, params, {prompt, output}, seed).token_id);
  }
  return output;
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDifferentTokens) {
  SamplingParams params;
  params.top_p = 0.95f;
  params.repetition_penalty = 1.1f;
  Sampler a;
  Sampler b;
  const std::vector<int32_t> first = Generate(a, params, 1234, 40);
  EXPECT_EQ(first, Generate(a, params, 1234, 40));
  EXPECT_EQ(first, Generate(b, params, 1234, 40));  // a fresh sampler
  EXPECT_NE(first, Generate(a, params, 1235, 40));
  EXPECT_EQ(EffectiveSeed(params, 77), 77u);
  params.seed = 5;
  EXPECT_EQ(EffectiveSeed(params, 77), 5u);
}

TEST(SamplerTest, DrawDoesNotDependOnOtherSequencesSampledInBetween) {
  SamplingParams params;
  params.temperature = 1.5f;
  constexpr int kNumTokens = 30;
  Sampler alone;
  const std::vector<int32_t> want_a = Generate(alone, params, 1, kNumTokens);
  const std::vector<int32_t> want_b = Generate(alone, params, 2, kNumTokens);

  // Interleave A and B on one sampler, in an order that changes every step,
  // with unrelated sequences sampled in between.
  Sampler shared;
  std::vector<int32_t> out_a, out_b;
  const std::vector<int32_t> prompt = {1, 2, 3};
  auto step = [&](std::vector<int32_t>& out, uint64_t seed) {
    const uint32_t key = out.empty() ? 0u : static_cast<uint32_t>(out.back());
    const std::vector<float> logits = RandomLogits(64, key);
    out.push_back(
        SampleOrDie(shared, logits, params, {prompt, out}, seed).token_id);
  };
  std::vector<int32_t> noise;
  for (int i = 0; i < kNumTokens; ++i) {
    if (i % 3 == 0) {
      step(out_b, 2);
      step(noise, 99);
      step(out_a, 1);
    } else {
      step(out_a, 1);
      step(out_b, 2);
    }
  }
  EXPECT_EQ(out_a, want_a);
  EXPECT_EQ(out_b, want_b);
}

}  // namespace
}  // namespace tributary

#include "engine/sampling/logits_penalizer.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::HasSubstr;

TEST(LogitsPenalizerTest, RepetitionPenaltyDividesPositiveMultipliesNegative) {
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f, 0.0f};
  const std::vector<int32_t> prompt = {0, 4};
  const std::vector<int32_t> output = {1, 1, 0};  // repeats: penalized once
  LogitsPenalizer penalizer;
  ASSERT_TRUE(
      penalizer.Apply(params, {prompt, output}, absl::MakeSpan(logits)).ok());
  EXPECT_THAT(logits, ElementsAre(FloatEq(1.0f), FloatEq(-4.0f), FloatEq(1.0f),
                                  FloatEq(0.5f), FloatEq(0.0f)));
}

TEST(LogitsPenalizerTest, PenaltyBelowOneRewardsSeenTokens) {
  SamplingParams params;
  params.repetition_penalty = 0.5f;
  std::vector<float> logits = {2.0f, -2.0f};
  const std::vector<int32_t> prompt = {0, 1};
  LogitsPenalizer penalizer;
  ASSERT_TRUE(
      penalizer.Apply(params, {prompt, {}}, absl::MakeSpan(logits)).ok());
  EXPECT_THAT(logits, ElementsAre(FloatEq(4.0f), FloatEq(-1.0f)));
}

TEST(LogitsPenalizerTest, PresenceAndFrequencyCountOutputTokensOnly) {
  SamplingParams params;
  params.presence_penalty = 0.5f;
  params.frequency_penalty = 0.25f;
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  const std::vector<int32_t> prompt = {0, 0, 1};  // not counted
  const std::vector<int32_t> output = {2, 3, 2, 2};
  LogitsPenalizer penalizer;
  ASSERT_TRUE(
      penalizer.Apply(params, {prompt, output}, absl::MakeSpan(logits)).ok());
  EXPECT_THAT(logits, ElementsAre(FloatEq(1.0f), FloatEq(1.0f),
                                  FloatEq(1.0f - 0.5f - 3 * 0.25f),
                                  FloatEq(1.0f - 0.5f - 1 * 0.25f)));
}

TEST(LogitsPenalizerTest, RepetitionThenFrequencyInVllmOrder) {
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  params.frequency_penalty = 1.0f;
  std::vector<float> logits = {3.0f};
  const std::vector<int32_t> output = {0, 0};
  LogitsPenalizer penalizer;
  ASSERT_TRUE(
      penalizer.Apply(params, {{}, output}, absl::MakeSpan(logits)).ok());
  EXPECT_FLOAT_EQ(logits[0], 3.0f / 2 - 2 * 1.0f);
}

TEST(LogitsPenalizerTest, ScratchIsCleanBetweenCalls) {
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  params.frequency_penalty = 1.0f;
  LogitsPenalizer penalizer;
  std::vector<float> first = {4.0f, 4.0f, 4.0f};
  const std::vector<int32_t> output = {0, 1, 1};
  ASSERT_TRUE(
      penalizer.Apply(params, {output, output}, absl::MakeSpan(first)).ok());
  // A second sequence that saw nothing must be untouched.
  std::vector<float> second = {4.0f, 4.0f, 4.0f};
  ASSERT_TRUE(penalizer.Apply(params, {}, absl::MakeSpan(second)).ok());
  EXPECT_THAT(second, ElementsAre(4.0f, 4.0f, 4.0f));
  // And the same history again gives the same result.
  std::vector<float> again = {4.0f, 4.0f, 4.0f};
  ASSERT_TRUE(
      penalizer.Apply(params, {output, output}, absl::MakeSpan(again)).ok());
  EXPECT_EQ(first, again);
}

TEST(LogitsPenalizerTest, HugeLogitStaysFinite) {
  SamplingParams params;
  params.repetition_penalty = 0.01f;
  std::vector<float> logits = {3e38f, -3e38f};
  const std::vector<int32_t> prompt = {0, 1};
  LogitsPenalizer penalizer;
  ASSERT_TRUE(
      penalizer.Apply(params, {prompt, {}}, absl::MakeSpan(logits)).ok());
  EXPECT_TRUE(std::isfinite(logits[0]));
  EXPECT_TRUE(std::isfinite(logits[1]));
}

TEST(LogitsPenalizerTest, OutOfRangeIdIsAnErrorAndLeavesLogits) {
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  std::vector<float> logits = {1.0f, 1.0f};
  const std::vector<int32_t> output = {0, 2};
  LogitsPenalizer penalizer;
  const absl::Status status =
      penalizer.Apply(params, {{}, output}, absl::MakeSpan(logits));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("output_ids[1] = 2"));
  EXPECT_THAT(logits, ElementsAre(1.0f, 1.0f));
}

TEST(LogitsPenalizerTest, NoPenaltiesIsANoOp) {
  SamplingParams params;
  std::vector<float> logits = {1.0f, -1.0f};
  const std::vector<int32_t> output = {0, 1, 7};  // even out of range
  LogitsPenalizer penalizer;
  ASSERT_TRUE(
      penalizer.Apply(params, {{}, output}, absl::MakeSpan(logits)).ok());
  EXPECT_THAT(logits, ElementsAre(1.0f, -1.0f));
}

}  // namespace
}  // namespace tributary

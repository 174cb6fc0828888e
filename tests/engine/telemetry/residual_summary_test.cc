#include "engine/telemetry/residual_summary.h"

#include <cmath>
#include <limits>
#include <vector>

#include "engine/backend/backend.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

// One row of kResidualStatsColumns values.
std::vector<float> Row(float stream, float update, float sum, float max_abs,
                       float dim, float nonfinite = 0.0f) {
  return {stream, update, sum, max_abs, dim, nonfinite};
}

TEST(ResidualSummaryTest, BucketBoundsAreTwoPerDecade) {
  const auto& b = RatioBucketBounds();
  EXPECT_DOUBLE_EQ(b.front(), 1e-4);
  EXPECT_DOUBLE_EQ(b.back(), 1e2);
  for (size_t i = 1; i < b.size(); ++i) {
    EXPECT_NEAR(b[i] / b[i - 1], std::sqrt(10.0), 1e-9);
  }
}

TEST(ResidualSummaryTest, MeanOfRatiosNotRatioOfMeans) {
  SublayerAccumulator a;
  a.AddToken(Row(1.0f, 1.0f, 1.5f, 0.9f, 3));    // ratio 1
  a.AddToken(Row(10.0f, 1.0f, 10.5f, 7.0f, 5));  // ratio 0.1
  EXPECT_EQ(a.num_tokens, 2);
  EXPECT_NEAR(a.mean_ratio(), 0.55, 1e-7);
  // The ratio of means would be 1 / 5.5.
  EXPECT_NEAR(a.mean_stream_norm(), 5.5, 1e-12);
  EXPECT_NEAR(a.mean_update_norm(), 1.0, 1e-12);
  EXPECT_NEAR(a.mean_sum_norm(), 6.0, 1e-12);
  EXPECT_FLOAT_EQ(a.max_ratio, 1.0f);
  EXPECT_FLOAT_EQ(a.max_abs, 7.0f);
  EXPECT_EQ(a.max_abs_dim, 5);
}

TEST(ResidualSummaryTest, ZeroStreamUsesTheFloor) {
  SublayerAccumulator a;
  a.AddToken(Row(0.0f, 1e-9f, 1e-9f, 1e-9f, 0));
  EXPECT_EQ(a.num_tokens, 1);
  EXPECT_NEAR(a.mean_ratio(), 1e-9 / 1e-12, 1.0);
  // Above 1e2: the overflow bucket.
  EXPECT_EQ(a.ratio_buckets.back(), 1);
}

TEST(ResidualSummaryTest, NonFiniteTokensAreCountedNotSummed) {
  SublayerAccumulator a;
  a.AddToken(Row(1.0f, 0.5f, 1.2f, 1.0f, 0));
  a.AddToken(Row(1.0f, std::numeric_limits<float>::quiet_NaN(), 1.0f, 1.0f, 0,
                 1.0f));
  a.AddToken(Row(1.0f, std::numeric_limits<float>::infinity(), 1.0f, 1.0f, 0));
  EXPECT_EQ(a.num_tokens, 1);
  EXPECT_EQ(a.num_nonfinite, 2);
  EXPECT_TRUE(std::isfinite(a.sum_ratio));
  EXPECT_NEAR(a.mean_ratio(), 0.5, 1e-7);
}

TEST(ResidualSummaryTest, HistogramBucketsByUpperBound) {
  SublayerAccumulator a;
  a.AddToken(Row(1.0f, 1e-5f, 1.0f, 1.0f, 0));  // below 1e-4: bucket 0
  a.AddToken(Row(1.0f, 1e-4f, 1.0f, 1.0f, 0));  // == 1e-4 (le): bucket 0
  a.AddToken(Row(1.0f, 0.2f, 1.0f, 1.0f, 0));   // (0.1, 0.316]: bucket 7
  a.AddToken(Row(1.0f, 1.0f, 1.0f, 1.0f, 0));   // == 1: bucket 8
  EXPECT_EQ(a.ratio_buckets[0], 2);
  EXPECT_EQ(a.ratio_buckets[7], 1);
  EXPECT_EQ(a.ratio_buckets[8], 1);
  int64_t total = 0;
  for (int64_t c : a.ratio_buckets) total += c;
  EXPECT_EQ(total, 4);
}

TEST(ResidualSummaryTest, AddStepSelectsTokenRangeOfEverySublayer) {
  // 2 layers (4 sublayers), 3 tokens: stream norm = 100 * sublayer + token.
  const int64_t num_tokens = 3;
  std::vector<float> stats;
  for (int s = 0; s < 4; ++s) {
    for (int t = 0; t < num_tokens; ++t) {
      const std::vector<float> row =
          Row(100.0f * s + t + 1, 1.0f, 1.0f, 1.0f, static_cast<float>(t));
      stats.insert(stats.end(), row.begin(), row.end());
    }
  }
  const std::vector<float> finals = {1.0f, 2.0f, 4.0f};
  ResidualSummary summary(2);
  summary.AddStep(stats, finals, num_tokens, 1, 3);  // tokens 1 and 2
  for (int s = 0; s < 4; ++s) {
    const SublayerAccumulator& a = summary.sublayers[static_cast<size_t>(s)];
    EXPECT_EQ(a.num_tokens, 2);
    EXPECT_NEAR(a.mean_stream_norm(), 100.0 * s + 2.5, 1e-9) << s;
  }
  EXPECT_EQ(summary.num_final_tokens, 2);
  EXPECT_NEAR(summary.sum_final_stream_norm, 6.0, 1e-12);
  EXPECT_FLOAT_EQ(summary.max_final_stream_norm, 4.0f);
  EXPECT_EQ(summary.at(1, Sublayer::kFfn).max_stream_norm, 303.0f);
}

TEST(ResidualSummaryTest, MergeEqualsAddingEverything) {
  SublayerAccumulator all, left, right;
  for (int i = 0; i < 10; ++i) {
    const std::vector<float> row =
        Row(1.0f + i, 0.1f * i, 2.0f + i, 0.5f * i, static_cast<float>(i));
    all.AddToken(row);
    (i % 3 == 0 ? left : right).AddToken(row);
  }
  left.Merge(right);
  EXPECT_EQ(left.num_tokens, all.num_tokens);
  EXPECT_NEAR(left.sum_ratio, all.sum_ratio, 1e-9);
  EXPECT_EQ(left.max_abs, all.max_abs);
  EXPECT_EQ(left.max_abs_dim, all.max_abs_dim);
  EXPECT_EQ(left.ratio_buckets, all.ratio_buckets);
}

}  // namespace
}  // namespace tributary

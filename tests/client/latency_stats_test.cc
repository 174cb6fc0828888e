#include "client/latency_stats.h"

#include <gtest/gtest.h>

namespace tributary {
namespace {

TEST(LatencyStatsTest, EmptyIsZero) {
  LatencyStats stats;
  EXPECT_EQ(stats.count(), 0);
  EXPECT_EQ(stats.mean(), 0.0);
  EXPECT_EQ(stats.Percentile(50), 0.0);
  EXPECT_EQ(stats.max(), 0.0);
}

TEST(LatencyStatsTest, NearestRankOnOneToHundred) {
  LatencyStats stats;
  // Added out of order: the percentile sorts.
  for (int i = 100; i >= 1; --i) stats.Add(i);
  EXPECT_EQ(stats.count(), 100);
  EXPECT_DOUBLE_EQ(stats.mean(), 50.5);
  EXPECT_EQ(stats.Percentile(0), 1.0);
  EXPECT_EQ(stats.Percentile(50), 50.0);
  // 0.9 · 100 is 90.000…01 in doubles: a naive ceil would give 91.
  EXPECT_EQ(stats.Percentile(90), 90.0);
  EXPECT_EQ(stats.Percentile(99), 99.0);
  EXPECT_EQ(stats.Percentile(100), 100.0);
  EXPECT_EQ(stats.Percentile(250), 100.0);  // clamped
  EXPECT_EQ(stats.min(), 1.0);
}

TEST(LatencyStatsTest, SmallSamplesAreRealSamples) {
  LatencyStats stats;
  stats.Add(0.010);
  EXPECT_EQ(stats.Percentile(1), 0.010);
  EXPECT_EQ(stats.Percentile(99), 0.010);
  stats.Add(0.030);
  stats.Add(0.020);
  stats.Add(0.040);
  // {10, 20, 30, 40} ms: rank ceil(0.5 · 4) = 2, ceil(0.9 · 4) = 4.
  EXPECT_EQ(stats.Percentile(50), 0.020);
  EXPECT_EQ(stats.Percentile(90), 0.040);
  EXPECT_EQ(stats.Percentile(25), 0.010);
  EXPECT_EQ(stats.Percentile(26), 0.020);
}

TEST(LatencyStatsTest, WeightedAddAndMerge) {
  LatencyStats a;
  a.Add(1.0, 3);  // one message of 3 tokens: 3 samples
  a.Add(2.0, 0);  // no tokens: nothing
  LatencyStats b;
  b.Add(5.0);
  a.Merge(b);
  EXPECT_EQ(a.count(), 4);
  EXPECT_DOUBLE_EQ(a.mean(), 2.0);
  EXPECT_EQ(a.Percentile(75), 1.0);
  EXPECT_EQ(a.Percentile(76), 5.0);
  // Adding after a percentile re-sorts.
  a.Add(0.5);
  EXPECT_EQ(a.min(), 0.5);
}

}  // namespace
}  // namespace tributary

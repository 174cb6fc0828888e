#include "engine/telemetry/residual_window.h"

#include <vector>

#include "gtest/gtest.h"

namespace tributary {
namespace {

ResidualSummary OneToken(float ratio) {
  ResidualSummary s(1);
  const std::vector<float> row = {1.0f, ratio, 1.0f, 1.0f, 0.0f, 0.0f};
  s.sublayers[0].AddToken(row);
  return s;
}

std::unique_ptr<ResidualWindow> Window(absl::Duration max_window,
                                       int buckets) {
  ResidualWindowOptions options;
  options.num_layers = 1;
  options.max_window = max_window;
  options.num_buckets = buckets;
  auto w = ResidualWindow::Create(options);
  EXPECT_TRUE(w.ok()) << w.status();
  return *std::move(w);
}

TEST(ResidualWindowTest, RejectsBadOptions) {
  ResidualWindowOptions options;
  options.num_layers = 0;
  EXPECT_FALSE(ResidualWindow::Create(options).ok());
  options.num_layers = 1;
  options.num_buckets = 0;
  EXPECT_FALSE(ResidualWindow::Create(options).ok());
  options.num_buckets = 10;
  options.max_window = absl::ZeroDuration();
  EXPECT_FALSE(ResidualWindow::Create(options).ok());
}

TEST(ResidualWindowTest, QueryCoversOnlyTheRecentPast) {
  auto w = Window(absl::Seconds(60), 60);
  const absl::Time t0 = absl::FromUnixSeconds(1000000);
  w->Add(OneToken(0.5f), t0);
  w->Add(OneToken(0.25f), t0 + absl::Seconds(30));
  const absl::Time now = t0 + absl::Seconds(45);
  EXPECT_EQ(w->Query(absl::Seconds(60), now).sublayers[0].num_tokens, 2);
  EXPECT_EQ(w->Query(absl::Seconds(20), now).sublayers[0].num_tokens, 1);
  EXPECT_NEAR(w->Query(absl::Seconds(20), now).sublayers[0].mean_ratio(), 0.25,
              1e-7);
  // Longer than the ring: clamped to 60 s.
  EXPECT_EQ(w->Query(absl::Hours(5), t0 + absl::Seconds(75))
                .sublayers[0]
                .num_tokens,
            1);
}

TEST(ResidualWindowTest, OldBucketsAreOverwrittenNotCounted) {
  auto w = Window(absl::Seconds(10), 10);
  const absl::Time t0 = absl::FromUnixSeconds(2000000);
  w->Add(OneToken(0.5f), t0);
  // Same ring slot, ten seconds later: the old bucket is cleared first.
  w->Add(OneToken(0.1f), t0 + absl::Seconds(10));
  const ResidualSummary s = w->Query(absl::Seconds(10), t0 + absl::Seconds(10));
  EXPECT_EQ(s.sublayers[0].num_tokens, 1);
  EXPECT_NEAR(s.sublayers[0].mean_ratio(), 0.1, 1e-7);
  // Nothing recent: empty.
  EXPECT_EQ(w->Query(absl::Seconds(10), t0 + absl::Seconds(100))
                .sublayers[0]
                .num_tokens,
            0);
}

}  // namespace
}  // namespace tributary

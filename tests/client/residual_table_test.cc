#include "client/residual_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace tributary {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

v1::SublayerResidualStats* AddRow(v1::ResidualStats* stats, int layer,
                                  v1::Sublayer sublayer, double mean_ratio) {
  v1::SublayerResidualStats* row = stats->add_sublayers();
  row->set_layer(layer);
  row->set_sublayer(sublayer);
  row->set_kind(layer % 4 == 3 ? v1::LAYER_KIND_FULL_ATTENTION
                               : v1::LAYER_KIND_LINEAR_ATTENTION);
  row->set_num_tokens(100);
  row->mutable_update_to_stream_ratio()->set_mean(mean_ratio);
  row->mutable_update_to_stream_ratio()->set_max(2 * mean_ratio);
  row->mutable_stream_norm()->set_mean(10.0);
  row->mutable_update_norm()->set_mean(10.0 * mean_ratio);
  row->set_max_abs_activation(42.5f);
  row->set_max_abs_dimension(7);
  return row;
}

// The number of '#' in a chart line.
size_t BarOf(const std::string& line) {
  const size_t open = line.find('|');
  size_t n = 0;
  for (size_t i = open + 1; i < line.size() && line[i] == '#'; ++i) ++n;
  return n;
}

TEST(RatioBarLengthTest, LogScaleEightCharactersPerDecade) {
  RatioChartOptions options;  // 1e-4 .. 1e2, 48 wide
  EXPECT_EQ(RatioBarLength(1e-4, options), 0);
  EXPECT_EQ(RatioBarLength(1e-3, options), 8);
  EXPECT_EQ(RatioBarLength(1e-2, options), 16);
  EXPECT_EQ(RatioBarLength(1.0, options), 32);
  EXPECT_EQ(RatioBarLength(1e2, options), 48);
  // Half a decade: 10^-1.5 sits 20 characters in.
  EXPECT_EQ(RatioBarLength(0.0316227766, options), 20);
  // Off the axis, zero (a dead branch), NaN.
  EXPECT_EQ(RatioBarLength(1e-9, options), 0);
  EXPECT_EQ(RatioBarLength(0.0, options), 0);
  EXPECT_EQ(RatioBarLength(-1.0, options), 0);
  EXPECT_EQ(RatioBarLength(std::nan(""), options), 0);
  EXPECT_EQ(RatioBarLength(1e9, options), 48);
  RatioChartOptions narrow;
  narrow.width = 12;
  EXPECT_EQ(RatioBarLength(1.0, narrow), 8);
}

TEST(ResidualTableTest, TableHasOneRowPerSublayerAndFlagsNonFinite) {
  v1::ResidualStats stats;
  stats.set_window_seconds(60);
  AddRow(&stats, 0, v1::SUBLAYER_MIXER, 0.05);
  AddRow(&stats, 0, v1::SUBLAYER_FFN, 0.2);
  v1::SublayerResidualStats* bad = AddRow(&stats, 3, v1::SUBLAYER_MIXER, 0.1);
  bad->set_num_nonfinite(3);
  const std::vector<std::string> lines = Lines(RenderResidualTable(stats));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find("mean ratio"), std::string::npos);
  EXPECT_NE(lines[0].find("non-finite"), std::string::npos);
  EXPECT_NE(lines[1].find("linear"), std::string::npos);
  EXPECT_NE(lines[1].find("mixer"), std::string::npos);
  EXPECT_NE(lines[1].find("5.00e-02"), std::string::npos);
  EXPECT_NE(lines[1].find("1.00e-01"), std::string::npos);  // max ratio
  EXPECT_NE(lines[1].find("42.5"), std::string::npos);
  EXPECT_EQ(lines[1].find("NON-FINITE"), std::string::npos);
  EXPECT_NE(lines[2].find("ffn"), std::string::npos);
  EXPECT_NE(lines[3].find("full"), std::string::npos);
  EXPECT_NE(lines[3].find("NON-FINITE"), std::string::npos);
  // Columns line up: every row as wide as the header (before the flag).
  EXPECT_EQ(lines[1].size(), lines[0].size());
  EXPECT_EQ(lines[2].size(), lines[0].size());
}

TEST(ResidualTableTest, RowWithoutTokensShowsDashesNotZeros) {
  v1::ResidualStats stats;
  v1::SublayerResidualStats* row = stats.add_sublayers();
  row->set_layer(1);
  row->set_sublayer(v1::SUBLAYER_FFN);
  const std::string line = Lines(RenderResidualTable(stats))[1];
  EXPECT_EQ(line.find("0.00e+00"), std::string::npos);
  EXPECT_NE(line.find(" -"), std::string::npos);
  EXPECT_NE(RenderRatioChart(stats, RatioChartOptions()).find("(no tokens)"),
            std::string::npos);
}

TEST(ResidualTableTest, ChartBarsFollowTheLogScale) {
  v1::ResidualStats stats;
  AddRow(&stats, 0, v1::SUBLAYER_MIXER, 1e-3);
  AddRow(&stats, 0, v1::SUBLAYER_FFN, 1.0);
  AddRow(&stats, 1, v1::SUBLAYER_MIXER, 1e-6);  // dead branch
  AddRow(&stats, 1, v1::SUBLAYER_FFN, 500.0);   // swamping update
  AddRow(&stats, 2, v1::SUBLAYER_MIXER, 0.01)->set_num_nonfinite(2);
  const std::vector<std::string> lines =
      Lines(RenderRatioChart(stats, RatioChartOptions()));
  // Title, axis labels, axis ticks, then the rows.
  ASSERT_EQ(lines.size(), 3u + 5u);
  EXPECT_NE(lines[1].find("1e-04"), std::string::npos);
  EXPECT_NE(lines[1].find("1e+02"), std::string::npos);
  // The ticks sit 8 characters apart, starting where the bars start.
  const size_t first_tick = lines[2].find('|');
  EXPECT_EQ(lines[2][first_tick + 8], '|');
  EXPECT_EQ(lines[3].find('|'), first_tick);
  EXPECT_EQ(BarOf(lines[3]), 8u);
  EXPECT_EQ(BarOf(lines[4]), 32u);
  EXPECT_EQ(BarOf(lines[5]), 0u);
  EXPECT_NE(lines[5].find("< 1.00e-06"), std::string::npos);
  EXPECT_EQ(BarOf(lines[6]), 48u);
  EXPECT_NE(lines[6].find("> 5.00e+02"), std::string::npos);
  EXPECT_EQ(BarOf(lines[7]), 16u);
  EXPECT_NE(lines[7].find("NON-FINITE (2)"), std::string::npos);
  EXPECT_EQ(lines[3].find("NON-FINITE"), std::string::npos);
}

TEST(ResidualTableTest, FullRenderingHasHeaderTableAndChart) {
  v1::ResidualStats stats;
  stats.set_window_seconds(30);
  stats.set_final_num_tokens(100);
  stats.mutable_final_stream_norm()->set_mean(55.5);
  AddRow(&stats, 0, v1::SUBLAYER_MIXER, 0.1);
  const std::string text = RenderResidualStats(stats, RatioChartOptions());
  EXPECT_EQ(text.rfind("window: 30 s\n", 0), 0u);
  EXPECT_NE(text.find("final stream |x|: mean 55.5"), std::string::npos);
  EXPECT_NE(text.find("mean ratio"), std::string::npos);
  EXPECT_NE(text.find("log scale"), std::string::npos);
}

}  // namespace
}  // namespace tributary

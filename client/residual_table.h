// Renders a ResidualStats message (GetResidualStats, or a request's
// residual_summary) for a terminal: a table with one row per (layer,
// sublayer), and a bar chart of the mean update-to-stream ratio on a log
// scale, so that a dead branch (a bar near nothing) or a swamping update (a
// bar off the right edge) stands out. Pure functions of the message.
#ifndef TRIBUTARY_CLIENT_RESIDUAL_TABLE_H_
#define TRIBUTARY_CLIENT_RESIDUAL_TABLE_H_

#include <string>

#include "tributary/v1/tributary.pb.h"

namespace tributary {

struct RatioChartOptions {
  // The chart's axis: [min_ratio, max_ratio], log-scaled, `width` characters
  // wide. The defaults are the decades of the Prometheus ratio histogram
  // (design.md §5): 6 decades, 8 characters each.
  double min_ratio = 1e-4;
  double max_ratio = 1e2;
  int width = 48;
};

// The number of bar characters for `ratio`: 0 at or below min_ratio (and
// for 0, a negative or a NaN ratio), `width` at or above max_ratio,
// round(width · log(ratio / min) / log(max / min)) between.
int RatioBarLength(double ratio, const RatioChartOptions& options);

// "mixer", "ffn"; "linear", "full" ("?" for an unspecified value).
std::string SublayerName(v1::Sublayer sublayer);
std::string LayerKindName(v1::LayerKind kind);

// The table: a header line, then one line per sublayer entry in message
// order with layer, kind, sublayer, tokens, mean and max ratio, mean ‖x‖,
// mean ‖u‖, non-finite count, max |y| and its dimension; a row with
// non-finite tokens ends with "NON-FINITE". Ends with a newline.
std::string RenderResidualTable(const v1::ResidualStats& stats);

// The bar chart: an axis with one label per decade, then one line per
// sublayer entry: label, bar of '#', the mean ratio; '<' marks a ratio below
// the axis, '>' one above it, "NON-FINITE" an entry with non-finite tokens,
// "(no tokens)" an empty one. Ends with a newline.
std::string RenderRatioChart(const v1::ResidualStats& stats,
                             const RatioChartOptions& options);

// What `tributary stats` prints: the window (when not 0) and the final
// stream norm, the table, a blank line, the chart.
std::string RenderResidualStats(const v1::ResidualStats& stats,
                                const RatioChartOptions& options);

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_RESIDUAL_TABLE_H_

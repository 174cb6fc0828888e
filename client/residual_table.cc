#include "client/residual_table.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tributary {
namespace {

// A row label shared by the table and the chart: "  3 mixer linear".
std::string RowLabel(const v1::SublayerResidualStats& row) {
  return absl::StrFormat("%3d %-5s %-6s", row.layer(),
                         SublayerName(row.sublayer()),
                         LayerKindName(row.kind()));
}

// Ratios span decades: scientific notation keeps the column aligned.
std::string Ratio(double value) { return absl::StrFormat("%.2e", value); }

std::string Norm(double value) { return absl::StrFormat("%.4g", value); }

}  // namespace

int RatioBarLength(double ratio, const RatioChartOptions& options) {
  // `!(ratio > min)` also sends NaN to the empty bar.
  if (!(ratio > options.min_ratio)) return 0;
  if (ratio >= options.max_ratio) return options.width;
  const double fraction = std::log(ratio / options.min_ratio) /
                          std::log(options.max_ratio / options.min_ratio);
  const long length = std::lround(fraction * options.width);
  return static_cast<int>(std::clamp<long>(length, 0, options.width));
}

std::string SublayerName(v1::Sublayer sublayer) {
  switch (sublayer) {
    case v1::SUBLAYER_MIXER:
      return "mixer";
    case v1::SUBLAYER_FFN:
      return "ffn";
    default:
      return "?";
  }
}

std::string LayerKindName(v1::LayerKind kind) {
  switch (kind) {
    case v1::LAYER_KIND_LINEAR_ATTENTION:
      return "linear";
    case v1::LAYER_KIND_FULL_ATTENTION:
      return "full";
    default:
      return "?";
  }
}

std::string RenderResidualTable(const v1::ResidualStats& stats) {
  std::string out = absl::StrFormat(
      "%5s %-6s %-8s %10s %10s %10s %10s %10s %10s %10s %6s\n", "layer", "kind",
      "sublayer", "tokens", "mean ratio", "max ratio", "mean |x|", "mean |u|",
      "non-finite", "max |y|", "dim");
  for (const v1::SublayerResidualStats& row : stats.sublayers()) {
    // A row without finite tokens has no means to show; zeros would read as
    // a dead branch.
    const bool has_tokens = row.num_tokens() > 0;
    auto shown = [&](const std::string& text) {
      return has_tokens ? text : std::string("-");
    };
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "%5d %-6s %-8s %10d %10s %10s %10s %10s %10d %10s %6s", row.layer(),
            LayerKindName(row.kind()), SublayerName(row.sublayer()),
            row.num_tokens(), shown(Ratio(row.update_to_stream_ratio().mean())),
            shown(Ratio(row.update_to_stream_ratio().max())),
            shown(Norm(row.stream_norm().mean())),
            shown(Norm(row.update_norm().mean())), row.num_nonfinite(),
            shown(Norm(row.max_abs_activation())),
            shown(absl::StrCat(row.max_abs_dimension()))));
    if (row.num_nonfinite() > 0) absl::StrAppend(&out, "  NON-FINITE");
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string RenderRatioChart(const v1::ResidualStats& stats,
                             const RatioChartOptions& options) {
  const std::string indent(RowLabel(v1::SublayerResidualStats()).size() + 1,
                           ' ');
  std::string out = "mean update-to-stream ratio |u|/|x|, log scale\n";
  // Axis: a label at every decade that lands on a character.
  std::string labels = indent, ticks = indent;
  const double decades = std::log10(options.max_ratio / options.min_ratio);
  for (int d = 0; d <= static_cast<int>(std::floor(decades + 1e-9)); ++d) {
    const double value = options.min_ratio * std::pow(10.0, d);
    const size_t column =
        indent.size() +
        static_cast<size_t>(std::lround(d / decades * options.width));
    const std::string label = absl::StrFormat("%.0e", value);
    if (labels.size() < column) labels.resize(column, ' ');
    // Skip a label that would run into the previous one (a narrow chart).
    if (labels.size() == column) labels += label;
    if (ticks.size() < column) ticks.resize(column, ' ');
    ticks += '|';
  }
  absl::StrAppend(&out, labels, "\n", ticks, "\n");
  for (const v1::SublayerResidualStats& row : stats.sublayers()) {
    absl::StrAppend(&out, RowLabel(row), " |");
    if (row.num_tokens() == 0) {
      absl::StrAppend(&out, std::string(options.width, ' '), "  (no tokens)");
    } else {
      const double ratio = row.update_to_stream_ratio().mean();
      const int length = RatioBarLength(ratio, options);
      const char edge = !(ratio > options.min_ratio) ? '<'
                        : ratio > options.max_ratio  ? '>'
                                                     : ' ';
      absl::StrAppend(&out, std::string(length, '#'),
                      std::string(options.width - length, ' '),
                      std::string(1, edge), " ", Ratio(ratio));
    }
    if (row.num_nonfinite() > 0) {
      absl::StrAppend(&out, "  NON-FINITE (", row.num_nonfinite(), ")");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

std::string RenderResidualStats(const v1::ResidualStats& stats,
                                const RatioChartOptions& options) {
  // A request's own summary has no window (0).
  std::string out =
      stats.window_seconds() > 0
          ? absl::StrFormat("window: %g s\n", stats.window_seconds())
          : std::string();
  if (stats.final_num_tokens() > 0) {
    absl::StrAppend(
        &out,
        absl::StrFormat("final stream |x|: mean %s, max %s over %d tokens\n",
                        Norm(stats.final_stream_norm().mean()),
                        Norm(stats.final_stream_norm().max()),
                        stats.final_num_tokens()));
  } else {
    absl::StrAppend(&out, "final stream |x|: no tokens in the window\n");
  }
  absl::StrAppend(&out, "\n", RenderResidualTable(stats), "\n",
                  RenderRatioChart(stats, options));
  return out;
}

}  // namespace tributary

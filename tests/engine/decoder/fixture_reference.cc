#include "fixture_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "nlohmann/json.hpp"

namespace tributary {
namespace testing_fixtures {

namespace fs = std::filesystem;
using nlohmann::json;

std::string SourcePath(const std::string& relative) {
  return std::string(TRIBUTARY_SOURCE_DIR) + "/" + relative;
}

std::vector<std::string> FixtureModelDirs() {
  std::vector<std::string> dirs;
  const fs::path root = SourcePath("tests/fixtures/models");
  if (fs::is_directory(root)) {
    for (const auto& entry : fs::directory_iterator(root)) {
      if (fs::exists(entry.path() / "reference.json")) {
        dirs.push_back(entry.path().string());
      }
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::vector<FixtureDump> ReadFixture(const std::string& path) {
  std::vector<FixtureDump> dumps;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  if (!in.good()) return dumps;
  const json root = json::parse(in, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(root.is_discarded()) << path << " is not valid JSON";
  if (root.is_discarded()) return dumps;
  for (const json& d : root.at("references")) {
    FixtureDump dump;
    dump.prompt_ids = d.at("prompt_ids").get<std::vector<int32_t>>();
    dump.generated_ids = d.at("generated_ids").get<std::vector<int32_t>>();
    dump.logits = d.at("logits").get<std::vector<std::vector<double>>>();
    dump.margins = d.at("margins").get<std::vector<double>>();
    dump.generated_margins = d.at("generated_margins").get<std::vector<double>>();
    for (const json& r : d.at("residual")) {
      ResidualEntry entry;
      entry.layer = r.at("layer").get<int64_t>();
      entry.sublayer = r.at("sublayer").get<std::string>();
      entry.stream_norm = r.at("stream_norm").get<std::vector<double>>();
      entry.update_norm = r.at("update_norm").get<std::vector<double>>();
      entry.sum_norm = r.at("sum_norm").get<std::vector<double>>();
      dump.residual.push_back(std::move(entry));
    }
    dump.final_stream_norm = d.at("final_stream_norm").get<std::vector<double>>();
    dumps.push_back(std::move(dump));
  }
  return dumps;
}

RowError CompareRow(const float* ours, const std::vector<double>& ref) {
  RowError error;
  for (size_t i = 0; i < ref.size(); ++i) {
    error.max_ref = std::max(error.max_ref, std::fabs(ref[i]));
    error.max_diff = std::max(error.max_diff, std::fabs(ours[i] - ref[i]));
  }
  return error;
}

int32_t ArgMax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

void ExpectPrefillMatches(const FixtureDump& dump, const PrefillResult& result,
                          int64_t vocab, double tolerance,
                          const std::string& label, double norm_tolerance) {
  const size_t num_prompt = dump.prompt_ids.size();
  ASSERT_EQ(dump.logits.size(), num_prompt) << label;
  ASSERT_EQ(result.logits.size(), num_prompt * vocab) << label;
  for (size_t t = 0; t < num_prompt; ++t) {
    ASSERT_EQ(static_cast<int64_t>(dump.logits[t].size()), vocab) << label;
    const RowError e = CompareRow(result.logits.data() + t * vocab, dump.logits[t]);
    EXPECT_LE(e.max_diff, tolerance * e.max_ref)
        << label << " position " << t << ": max |diff| " << e.max_diff
        << " vs max |ref| " << e.max_ref;
  }
  ASSERT_EQ(result.norms.size(), dump.residual.size()) << label;
  auto close = [&](double ours, double ref) {
    const double norm_tol = norm_tolerance < 0 ? tolerance : norm_tolerance;
    return std::fabs(ours - ref) <= norm_tol * std::fabs(ref) + 1e-6;
  };
  static const char* kNames[3] = {"stream_norm", "update_norm", "sum_norm"};
  for (size_t i = 0; i < dump.residual.size(); ++i) {
    const ResidualEntry& ref = dump.residual[i];
    ASSERT_EQ(ref.layer, static_cast<int64_t>(i / 2)) << label;
    ASSERT_EQ(ref.sublayer, i % 2 == 0 ? "mixer" : "ffn") << label;
    ASSERT_EQ(result.norms[i].size(), num_prompt) << label;
    const std::vector<double>* columns[3] = {&ref.stream_norm, &ref.update_norm,
                                             &ref.sum_norm};
    for (int c = 0; c < 3; ++c) {
      for (size_t t = 0; t < num_prompt; ++t) {
        EXPECT_TRUE(close(result.norms[i][t][c], (*columns[c])[t]))
            << label << " layer " << ref.layer << " " << ref.sublayer << " "
            << kNames[c] << " token " << t << ": " << result.norms[i][t][c]
            << " vs " << (*columns[c])[t];
      }
    }
  }
  ASSERT_EQ(result.final_stream_norm.size(), num_prompt) << label;
  for (size_t t = 0; t < num_prompt; ++t) {
    EXPECT_TRUE(close(result.final_stream_norm[t], dump.final_stream_norm[t]))
        << label << " final_stream_norm token " << t;
  }
}

void ExpectGreedyMatches(const FixtureDump& dump, std::vector<float> last_logits,
                         const std::function<std::vector<float>(int32_t)>& decode,
                         int64_t vocab, const std::string& label,
                         double near_tie_fraction) {
  double max_abs_logit = 0.0;
  for (const auto& row : dump.logits) {
    for (double x : row) max_abs_logit = std::max(max_abs_logit, std::fabs(x));
  }
  const double near_tie = near_tie_fraction * max_abs_logit;
  const std::vector<int32_t>& generated = dump.generated_ids;
  int compared = 0;
  for (size_t i = 0; i < generated.size(); ++i) {
    ASSERT_EQ(static_cast<int64_t>(last_logits.size()), vocab) << label;
    if (dump.generated_margins[i] > near_tie) {
      EXPECT_EQ(ArgMax(last_logits.data(), vocab), generated[i])
          << label << " greedy step " << i << " (margin "
          << dump.generated_margins[i] << ")";
      ++compared;
    }
    if (i + 1 < generated.size()) last_logits = decode(generated[i]);
  }
  EXPECT_GT(compared, 0) << label << ": every greedy step was a near-tie";
}

}  // namespace testing_fixtures
}  // namespace tributary

// A direction made from examples steers the default model: the mean stream
// difference between ROMEO's and MENENIUS's speeches (MeanStream, what
// tributary-direction writes), added to the stream, makes held-out speeches
// of ROMEO more likely relative to MENENIUS's than subtracting it does (a
// rank test over the held-out speeches; deterministic, no sampling).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/decoder/direction_builder.h"
#include "engine/decoder/hybrid_decoder.h"
#include "engine/model/model_directory.h"
#include "engine/tokenizer/tokenizer.h"

namespace tributary {
namespace {

constexpr int64_t kMaxTokens = 48;

// The speeches of `speaker` in the corpus (the lines after "SPEAKER:").
std::vector<std::string> Speeches(const std::string& corpus,
                                  const std::string& speaker) {
  std::vector<std::string> out;
  for (absl::string_view block : absl::StrSplit(corpus, "\n\n")) {
    const size_t newline = block.find('\n');
    if (newline == absl::string_view::npos) continue;
    if (block.substr(0, newline) == speaker + ":") {
      out.emplace_back(block.substr(newline + 1));
    }
  }
  return out;
}

class DirectionSteeringTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir =
        std::string(TRIBUTARY_SOURCE_DIR) + "/models/tiny-shakespeare";
    auto model = ModelDirectory::Load(dir);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = std::make_unique<ModelDirectory>(std::move(*model));
    auto tokenizer = Tokenizer::Load(dir);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::move(*tokenizer);
    auto backend = CpuBackend::Create({2});
    ASSERT_TRUE(backend.ok());
    backend_ = std::move(*backend);
    auto decoder = HybridDecoder::Create(model_->config(), model_->weights(),
                                         backend_.get(), {4, 16, 1});
    ASSERT_TRUE(decoder.ok()) << decoder.status();
    decoder_ = std::move(*decoder);
  }

  std::vector<std::vector<int32_t>> Encode(
      const std::vector<std::string>& texts) {
    std::vector<std::vector<int32_t>> out;
    for (const std::string& t : texts) {
      auto ids = tokenizer_->Encode(t);
      EXPECT_TRUE(ids.ok());
      std::vector<int32_t> v = *ids;
      if (static_cast<int64_t>(v.size()) > kMaxTokens) v.resize(kMaxTokens);
      if (v.size() >= 8) out.push_back(std::move(v));
    }
    return out;
  }

  // Σ log p(t_i | t_<i) over i ≥ 1 with `scale` · direction added after
  // `layer`'s ffn at every position.
  double LogLikelihood(const std::vector<int32_t>& ids,
                       const std::vector<float>& direction, int32_t layer,
                       float scale) {
    EXPECT_TRUE(decoder_->ResetStateSlot(0).ok());
    const int64_t n = static_cast<int64_t>(ids.size());
    BatchLayout layout;
    SequenceSlice s;
    s.num_tokens = n;
    s.block_table = {0, 1, 2};
    layout.sequences.push_back(s);
    StepInterventions iv;
    iv.steers.push_back({2 * layer + 1, 0, n, &direction, scale});
    ForwardOptions options;
    options.residual_stats = false;
    options.logits_for_all_tokens = true;
    options.interventions = &iv;
    auto out = decoder_->Forward(layout, ids, options);
    EXPECT_TRUE(out.ok()) << out.status();
    const int64_t vocab = model_->config().vocab_size;
    double ll = 0.0;
    for (int64_t t = 0; t + 1 < n; ++t) {
      const float* l = out->logits.data() + t * vocab;
      double m = -INFINITY, sum = 0.0;
      for (int64_t i = 0; i < vocab; ++i)
        m = std::max(m, static_cast<double>(l[i]));
      for (int64_t i = 0; i < vocab; ++i) sum += std::exp(l[i] - m);
      ll += l[ids[t + 1]] - m - std::log(sum);
    }
    return ll;
  }

  std::unique_ptr<ModelDirectory> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<HybridDecoder> decoder_;
};

TEST_F(DirectionSteeringTest, RomeoMinusMeneniusShiftsTowardRomeo) {
  std::ifstream in(std::string(TRIBUTARY_SHARED_DIR) +
                   "/data/corpus/tinyshakespeare.txt");
  ASSERT_TRUE(in) << "cannot read ../shared/data/corpus/tinyshakespeare.txt";
  std::stringstream text;
  text << in.rdbuf();
  const auto romeo = Encode(Speeches(text.str(), "ROMEO"));
  const auto menenius = Encode(Speeches(text.str(), "MENENIUS"));
  ASSERT_GE(romeo.size(), 120u);
  ASSERT_GE(menenius.size(), 120u);
  // Speeches 0..79 make the direction; the others are held out.
  const std::vector<std::vector<int32_t>> a(romeo.begin(), romeo.begin() + 80);
  const std::vector<std::vector<int32_t>> b(menenius.begin(),
                                            menenius.begin() + 80);
  const int32_t layer = 3;
  const float scale = 2.0f;
  auto mean_a = MeanStream(*decoder_, a, {layer, true}, true);
  auto mean_b = MeanStream(*decoder_, b, {layer, true}, true);
  ASSERT_TRUE(mean_a.ok() && mean_b.ok());
  std::vector<float> direction(mean_a->size());
  for (size_t i = 0; i < direction.size(); ++i) {
    direction[i] = (*mean_a)[i] - (*mean_b)[i];
  }
  // Each held-out speech's score: how much more likely it is with the
  // direction added than with it subtracted (nats). Adding anything to the
  // stream costs every text some likelihood, so the test compares the two
  // sets' scores rather than their signs: ROMEO's should rank above
  // MENENIUS's (the Mann-Whitney statistic).
  // Per token, so that long speeches do not dominate.
  std::vector<double> scores[2];
  for (int set = 0; set < 2; ++set) {
    const auto& held = set == 0 ? romeo : menenius;
    for (size_t i = 80; i < held.size(); ++i) {
      scores[set].push_back((LogLikelihood(held[i], direction, layer, scale) -
                             LogLikelihood(held[i], direction, layer, -scale)) /
                            static_cast<double>(held[i].size() - 1));
    }
  }
  const double n0 = static_cast<double>(scores[0].size());
  const double n1 = static_cast<double>(scores[1].size());
  double above = 0.0, mean[2] = {0.0, 0.0};
  for (double x : scores[0]) {
    for (double y : scores[1]) above += x > y ? 1.0 : x == y ? 0.5 : 0.0;
  }
  for (int set = 0; set < 2; ++set) {
    for (double x : scores[set]) mean[set] += x / (set == 0 ? n0 : n1);
  }
  const double auc = above / (n0 * n1);
  // No effect: AUC ≈ N(0.5, (n0 + n1 + 1) / (12 n0 n1)). z >= 3 is a
  // one-sided p below 0.0014.
  const double z = (auc - 0.5) / std::sqrt((n0 + n1 + 1.0) / (12.0 * n0 * n1));
  EXPECT_GE(z, 3.0) << "AUC " << auc;
  EXPECT_GT(mean[0], mean[1]);
  std::cout << "direction test: ROMEO's held-out speeches rank above "
               "MENENIUS's with AUC "
            << auc << " (z = " << z << ", " << n0 << " and " << n1
            << " speeches); mean score per token (ll(+v) - ll(-v)) ROMEO "
            << mean[0] << ", MENENIUS " << mean[1] << " nats\n";
}

}  // namespace
}  // namespace tributary

#include "engine/sampling/candidate_list.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using ::testing::ElementsAre;

std::vector<int32_t> Ids(const CandidateList& list) {
  std::vector<int32_t> ids;
  for (const Candidate& c : list.items()) ids.push_back(c.token_id);
  return ids;
}

std::vector<float> LogsOf(const std::vector<double>& probabilities) {
  std::vector<float> logits;
  for (double p : probabilities) logits.push_back(std::log(p));
  return logits;
}

TEST(CandidateListTest, TopKKeepsExactlyK) {
  const std::vector<float> logits = {1.0f, 5.0f, 3.0f, 5.0f, 2.0f};
  CandidateList list;
  list.Reset(logits, 1.0f);
  list.KeepTopK(3);
  EXPECT_THAT(Ids(list), ElementsAre(1, 2, 3));  // in id order
  // A tie at the boundary goes to the lower id: still exactly k.
  list.Reset(logits, 1.0f);
  list.KeepTopK(1);
  EXPECT_THAT(Ids(list), ElementsAre(1));
  list.Reset(logits, 1.0f);
  list.KeepTopK(0);  // off
  EXPECT_EQ(list.size(), 5u);
  list.Reset(logits, 1.0f);
  list.KeepTopK(9);  // more than the vocabulary
  EXPECT_EQ(list.size(), 5u);
}

TEST(CandidateListTest, TopPKeepsTheSmallestSetReachingP) {
  const std::vector<float> logits = LogsOf({0.05, 0.5, 0.15, 0.3});
  struct Case {
    double p;
    std::vector<int32_t> kept;  // in id order
  };
  for (const Case& c : std::vector<Case>{{0.3, {1}},
                                         {0.5, {1}},
                                         {0.6, {1, 3}},
                                         {0.8, {1, 3}},  // reached exactly
                                         {0.81, {1, 2, 3}},
                                         {0.96, {0, 1, 2, 3}},
                                         {1.0, {0, 1, 2, 3}}}) {
    SCOPED_TRACE(c.p);
    CandidateList list;
    list.Reset(logits, 1.0f);
    list.KeepTopP(c.p);
    EXPECT_EQ(Ids(list), c.kept);
  }
}

TEST(CandidateListTest, TopPSeesTheTemperature) {
  // T = 2 flattens 0.5/0.3/0.15/0.05 to sqrt-proportional weights, so 0.75
  // needs three tokens instead of two.
  const std::vector<float> logits = LogsOf({0.5, 0.3, 0.15, 0.05});
  CandidateList list;
  list.Reset(logits, 2.0f);
  list.KeepTopP(0.75);
  const double total =
      std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.15) + std::sqrt(0.05);
  ASSERT_LT((std::sqrt(0.5) + std::sqrt(0.3)) / total, 0.75);
  CandidateList cold;
  cold.Reset(logits, 1.0f);
  cold.KeepTopP(0.75);
  EXPECT_THAT(Ids(cold), ElementsAre(0, 1));
  EXPECT_THAT(Ids(list), ElementsAre(0, 1, 2));
}

TEST(CandidateListTest, TopPIsRelativeToTheTopKSet) {
  const std::vector<float> logits = LogsOf({0.4, 0.3, 0.2, 0.1});
  CandidateList list;
  list.Reset(logits, 1.0f);
  list.KeepTopK(2);  // renormalized: 4/7, 3/7
  list.KeepTopP(0.55);
  EXPECT_THAT(Ids(list), ElementsAre(0));
}

TEST(CandidateListTest, MinPIsRelativeToTheMostLikelyToken) {
  const std::vector<float> logits = LogsOf({0.3, 0.15, 0.5, 0.05});
  CandidateList list;
  list.Reset(logits, 1.0f);
  list.KeepMinP(0.25);  // threshold 0.125
  EXPECT_THAT(Ids(list), ElementsAre(0, 1, 2));
  list.Reset(logits, 1.0f);
  list.KeepMinP(0.35);  // threshold 0.175
  EXPECT_THAT(Ids(list), ElementsAre(0, 2));
  list.Reset(logits, 1.0f);
  list.KeepMinP(1.0);  // only the max
  EXPECT_THAT(Ids(list), ElementsAre(2));
  list.Reset(logits, 1.0f);
  list.KeepMinP(0.0);
  EXPECT_EQ(list.size(), 4u);
}

TEST(CandidateListTest, SampleWalksTheCumulativeDistribution) {
  const std::vector<float> logits = LogsOf({0.5, 0.3, 0.2});
  CandidateList list;
  list.Reset(logits, 1.0f);
  EXPECT_EQ(list.Sample(0.0), 0);
  EXPECT_EQ(list.Sample(0.49), 0);
  EXPECT_EQ(list.Sample(0.51), 1);
  EXPECT_EQ(list.Sample(0.79), 1);
  EXPECT_EQ(list.Sample(0.81), 2);
  EXPECT_EQ(list.Sample(std::nextafter(1.0, 0.0)), 2);
}

// The canonical order (the device sampler's too): after every step the
// survivors are in id order, and the draw walks them so: with 0.1 / 0.2 /
// 0.3 / 0.4 on ids 0..3 and top-k 3 (ids 1, 2, 3 renormalized to 2/9, 3/9,
// 4/9), u just below 2/9 is id 1 and just above is id 2 — not id 3, the
// most likely, which a walk in rank order would give first.
TEST(CandidateListTest, TheDrawWalksTheSurvivorsInIdOrder) {
  std::vector<float> logits = LogsOf({0.1, 0.2, 0.3, 0.4});
  std::vector<float> padded = logits;  // 256 ids: top-3 takes the heap path
  padded.resize(256, -100.0f);
  CandidateList list;
  for (const std::vector<float>* row : {&logits, &padded}) {
    list.Reset(*row, 1.0f);
    list.KeepTopK(3);
    EXPECT_THAT(Ids(list), ElementsAre(1, 2, 3));
    EXPECT_EQ(list.Sample(2.0 / 9 - 1e-6), 1);
    EXPECT_EQ(list.Sample(2.0 / 9 + 1e-6), 2);
    EXPECT_EQ(list.Sample(5.0 / 9 + 1e-6), 3);
  }
  list.Reset(logits, 1.0f);
  list.KeepTopP(0.65);  // ids 3, 2 in rank order; kept in id order
  EXPECT_THAT(Ids(list), ElementsAre(2, 3));
  EXPECT_EQ(list.Sample(0.3 / 0.7 - 1e-6), 2);
  EXPECT_EQ(list.Sample(0.3 / 0.7 + 1e-6), 3);
}

TEST(CandidateListTest, ProbabilitiesAreRenormalized) {
  const std::vector<float> logits = LogsOf({0.5, 0.3, 0.2});
  CandidateList list;
  list.Reset(logits, 1.0f);
  list.KeepTopK(2);
  double total = 0;
  for (const auto& [id, p] : list.Probabilities()) {
    total += p;
    if (id == 0) {
      EXPECT_NEAR(p, 0.5 / 0.8, 1e-6);
    }
  }
  EXPECT_NEAR(total, 1.0, 1e-12);
}

// The naive twin: rank the whole vocabulary with a full sort and cut.
std::vector<int32_t> NaiveTruncate(const std::vector<float>& logits,
                                   double temperature, int32_t k, double p,
                                   double min_p) {
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  if (k > 0 && static_cast<size_t>(k) < order.size()) order.resize(k);
  const double max_logit = logits[order[0]];
  auto weight = [&](int32_t id) {
    return std::exp((logits[id] - max_logit) / temperature);
  };
  if (p < 1.0) {
    double total = 0;
    for (int32_t id : order) total += weight(id);
    double cumulative = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      cumulative += weight(order[i]) / total;
      if (cumulative >= p * (1 - 1e-9)) {
        order.resize(i + 1);
        break;
      }
    }
  }
  if (min_p > 0) {
    std::vector<int32_t> kept;
    for (int32_t id : order) {
      if (weight(id) >= min_p) kept.push_back(id);
    }
    order = kept;
  }
  std::sort(order.begin(), order.end());
  return order;
}

TEST(CandidateListTest, MatchesNaiveFullSortOnAFullSizeVocabulary) {
  constexpr size_t kVocab = 248320;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(kVocab);
  for (float& logit : logits) logit = normal(rng);
  logits[123] = logits[456];  // a tie somewhere

  struct Case {
    float temperature;
    int32_t k;
    double p;
    double min_p;
  };
  const std::vector<Case> cases = {
      {1.0f, 50, 1.0, 0.0},   {1.0f, 0, 0.9, 0.0},
      {0.7f, 0, 0.99, 0.0},   {1.3f, 1000, 0.95, 0.0},
      {1.0f, 0, 1.0, 0.05},   {0.8f, 40, 0.9, 0.1},
      {1.0f, 0, 0.5, 0.0},    {2.0f, 0, 0.999, 0.0},
      {1.0f, 10000, 0.9, 0.0}};  // k large: the nth_element path
  CandidateList list;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "T=" << c.temperature << " k=" << c.k
                                    << " p=" << c.p << " min_p=" << c.min_p);
    list.Reset(logits, c.temperature);
    list.KeepTopK(c.k);
    list.KeepTopP(c.p);
    list.KeepMinP(c.min_p);
    std::vector<int32_t> got = Ids(list);
    std::sort(got.begin(), got.end());
    const std::vector<int32_t> want =
        NaiveTruncate(logits, c.temperature, c.k, c.p, c.min_p);
    EXPECT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want);
  }
}

}  // namespace
}  // namespace tributary

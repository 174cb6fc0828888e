// The sampler's empirical distribution against the target distribution,
// computed independently here in double, with a chi-squared goodness-of-fit
// test. The draws are seeded, so each test is deterministic: it cannot flake,
// and a failure is a real departure (or a generator defect). The threshold
// p-value > 1e-4 would reject a correct sampler only once in 10^4 seeds.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/sampling/sampler.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

constexpr double kMinPValue = 1e-4;
constexpr int kNumDraws = 100000;

// Q(a, x), the regularized upper incomplete gamma function (series for
// x < a + 1, Lentz's continued fraction otherwise; Numerical Recipes 6.2).
double GammaQ(double a, double x) {
  if (x <= 0) return 1.0;
  const double log_prefactor = -x + a * std::log(x) - std::lgamma(a);
  if (x < a + 1) {
    double ap = a, term = 1.0 / a, sum = term;
    for (int n = 0; n < 10000 && std::fabs(term) > std::fabs(sum) * 1e-16;
         ++n) {
      ap += 1;
      term *= x / ap;
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefactor);
  }
  constexpr double kTiny = 1e-300;
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-16) break;
  }
  return std::exp(log_prefactor) * h;
}

// P(chi2 with `dof` degrees of freedom >= statistic).
double ChiSquaredPValue(double statistic, int dof) {
  return GammaQ(dof / 2.0, statistic / 2.0);
}

TEST(ChiSquaredTest, PValueMatchesTables) {
  EXPECT_NEAR(ChiSquaredPValue(3.841, 1), 0.05, 1e-4);
  EXPECT_NEAR(ChiSquaredPValue(18.307, 10), 0.05, 1e-4);
  EXPECT_NEAR(ChiSquaredPValue(23.209, 10), 0.01, 1e-4);
  EXPECT_NEAR(ChiSquaredPValue(2.0, 2), std::exp(-1.0), 1e-12);
}

const std::vector<float>& TestLogits() {
  static const std::vector<float> logits = {2.0f,  1.5f,  1.2f,  1.0f,
                                            0.7f,  0.5f,  0.2f,  0.0f,
                                            -0.3f, -0.8f, -1.5f, -3.0f};
  return logits;
}

// The target: temperature, top-k, top-p, min-p on a fully sorted list.
std::vector<double> Target(const std::vector<float>& logits,
                           const SamplingParams& params) {
  const size_t n = logits.size();
  std::vector<int> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return logits[a] > logits[b]; });
  std::vector<double> p(n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    p[i] = std::exp(static_cast<double>(logits[i]) / params.temperature);
  }
  auto normalize = [&] {
    double total = 0;
    for (double x : p) total += x;
    for (double& x : p) x /= total;
  };
  normalize();
  if (params.top_k > 0) {
    for (size_t r = params.top_k; r < n; ++r) p[order[r]] = 0;
    normalize();
  }
  if (params.top_p < 1) {
    double cumulative = 0;
    size_t r = 0;
    for (; r < n; ++r) {
      cumulative += p[order[r]];
      if (cumulative >= params.top_p) break;
    }
    for (size_t s = r + 1; s < n; ++s) p[order[s]] = 0;
    normalize();
  }
  if (params.min_p > 0) {
    const double threshold = params.min_p * p[order[0]];
    for (double& x : p) {
      if (x < threshold) x = 0;
    }
    normalize();
  }
  return p;
}

// Draws kNumDraws tokens: by token index with one seed, or by seed at one
// index, the two axes of the generator.
std::vector<int64_t> Counts(const SamplingParams& params, bool vary_seed) {
  const std::vector<float>& logits = TestLogits();
  const std::vector<int32_t> history(kNumDraws, 0);
  Sampler sampler;
  std::vector<int64_t> counts(logits.size(), 0);
  for (int i = 0; i < kNumDraws; ++i) {
    const TokenHistory h{{},
                         absl::MakeConstSpan(history).first(
                             vary_seed ? 0 : static_cast<size_t>(i))};
    const uint64_t seed = vary_seed ? static_cast<uint64_t>(i) : 20240601u;
    absl::StatusOr<SampleResult> result =
        sampler.Sample(logits, params, h, seed);
    EXPECT_TRUE(result.ok());
    if (result.ok()) ++counts[result->token_id];
  }
  return counts;
}

void ExpectMatches(const SamplingParams& params, bool vary_seed) {
  const std::vector<double> target = Target(TestLogits(), params);
  const std::vector<int64_t> counts = Counts(params, vary_seed);
  double statistic = 0;
  int num_kept = 0;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "truncated token " << i << " was drawn";
      continue;
    }
    ++num_kept;
    const double expected = target[i] * kNumDraws;
    statistic += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  ASSERT_GE(num_kept, 2);
  const double p_value = ChiSquaredPValue(statistic, num_kept - 1);
  EXPECT_GT(p_value, kMinPValue)
      << "chi2 = " << statistic << " with " << num_kept - 1 << " dof";
}

struct Settings {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
};

class SamplerStatisticsTest : public testing::TestWithParam<Settings> {};

TEST_P(SamplerStatisticsTest, EmpiricalDistributionMatchesTarget) {
  SamplingParams params;
  params.temperature = GetParam().temperature;
  params.top_k = GetParam().top_k;
  params.top_p = GetParam().top_p;
  params.min_p = GetParam().min_p;
  ASSERT_TRUE(params.Validate().ok());
  SCOPED_TRACE("over token indices");
  ExpectMatches(params, /*vary_seed=*/false);
  SCOPED_TRACE("over seeds");
  ExpectMatches(params, /*vary_seed=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    Settings, SamplerStatisticsTest,
    testing::Values(Settings{1.0f, 0, 1.0f, 0.0f},  // the model's own
                    Settings{0.5f, 0, 1.0f, 0.0f},  // sharpened
                    Settings{2.0f, 0, 1.0f, 0.0f},  // flattened
                    Settings{0.7f, 5, 1.0f, 0.0f},  // top-k
                    Settings{1.3f, 0, 0.7f, 0.0f},  // top-p
                    Settings{1.0f, 0, 1.0f, 0.3f},  // min-p
                    Settings{0.9f, 8, 0.85f, 0.1f}  // all together
                    ));

// The test is sensitive: a slightly wrong temperature is rejected.
TEST(SamplerStatisticsPowerTest, DetectsAWrongTemperature) {
  SamplingParams sampled;
  sampled.temperature = 1.1f;
  SamplingParams claimed;
  claimed.temperature = 1.0f;
  const std::vector<double> target = Target(TestLogits(), claimed);
  const std::vector<int64_t> counts = Counts(sampled, false);
  double statistic = 0;
  for (size_t i = 0; i < target.size(); ++i) {
    const double expected = target[i] * kNumDraws;
    statistic += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  EXPECT_LT(ChiSquaredPValue(statistic, target.size() - 1), kMinPValue);
}

}  // namespace
}  // namespace tributary

#include "engine/sampling/philox.h"

#include <cstdint>
#include <set>

#include "gtest/gtest.h"

namespace tributary {
namespace {

// Known-answer vectors of the Random123 reference (kat_vectors,
// philox4x32 with 10 rounds).
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(
      Philox4x32({0, 0, 0, 0}, {0, 0}),
      (PhiloxCounter{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(
      Philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                 {0xffffffffu, 0xffffffffu}),
      (PhiloxCounter{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(
      Philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                 {0xa4093822u, 0x299f31d0u}),
      (PhiloxCounter{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(PhiloxTest, UniformIsAPureFunctionOfSeedAndIndex) {
  EXPECT_EQ(UniformForToken(42, 7), UniformForToken(42, 7));
  EXPECT_NE(UniformForToken(42, 7), UniformForToken(42, 8));
  EXPECT_NE(UniformForToken(42, 7), UniformForToken(43, 7));
  EXPECT_NE(UniformForToken(42, 7, 0), UniformForToken(42, 7, 1));
  // The high halves of seed and index take part too.
  EXPECT_NE(UniformForToken(1, 0), UniformForToken(1 + (1ull << 32), 0));
  EXPECT_NE(UniformForToken(1, 0), UniformForToken(1, 1ull << 32));
}

TEST(PhiloxTest, UniformIsInUnitIntervalWithSaneMoments) {
  constexpr int kNum = 100000;
  double sum = 0.0, sum_sq = 0.0;
  std::set<double> distinct;
  for (int i = 0; i < kNum; ++i) {
    const double u = UniformForToken(12345, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
    distinct.insert(u);
  }
  // Mean 1/2 and variance 1/12; the standard error of the mean is
  // sqrt(1/12/1e5) ~ 9e-4, so 5e-3 is over 5 sigma (and deterministic).
  EXPECT_NEAR(sum / kNum, 0.5, 5e-3);
  EXPECT_NEAR(sum_sq / kNum - (sum / kNum) * (sum / kNum), 1.0 / 12, 5e-3);
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kNum));
}

}  // namespace
}  // namespace tributary

#include "engine/backend/element_type.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tributary {
namespace {

TEST(ElementTypeTest, F16KnownValues) {
  EXPECT_EQ(F16ToF32(0x3C00), 1.0f);
  EXPECT_EQ(F16ToF32(0xC000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7BFF), 65504.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(F16ToF32(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(F16ToF32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::isinf(F16ToF32(0x7C00)));
  EXPECT_TRUE(std::isnan(F16ToF32(0x7E00)));
  EXPECT_TRUE(std::signbit(F16ToF32(0x8000)));
}

TEST(ElementTypeTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Bf16ToF32(F32ToBf16(1.0f)), 1.0f);
  // 1 + 2^-8 is exactly half way between bf16 1.0 and 1 + 2^-7: ties to even.
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  // 1 + 3·2^-8 is half way between 1 + 2^-7 (odd) and 1 + 2^-6: rounds up.
  EXPECT_EQ(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(std::nanf("")))));
  EXPECT_TRUE(std::isinf(Bf16ToF32(
      F32ToBf16(std::numeric_limits<float>::infinity()))));
}

TEST(ElementTypeTest, F16RoundTripsEveryValueAndRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = F16ToF32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f))));
    } else {
      ASSERT_EQ(F32ToF16(f), h) << std::hex << h;
    }
  }
  // 1 + 2^-11 is half way between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(F32ToF16(65519.0f), 0x7BFF);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7C00);
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(F32ToF16(std::ldexp(3.0f, -25)), 0x0002);
}

TEST(ElementTypeTest, LoadAsF32ReadsEachDType) {
  const float f32[] = {0.5f, -3.0f};
  const uint16_t bf16[] = {F32ToBf16(0.5f), F32ToBf16(-3.0f)};
  const uint16_t f16[] = {0x3800, 0xC200};
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(LoadAsF32(f32, ElementType::kF32, i), f32[i]);
    EXPECT_EQ(LoadAsF32(bf16, ElementType::kBF16, i), f32[i]);
    EXPECT_EQ(LoadAsF32(f16, ElementType::kF16, i), f32[i]);
  }
}

}  // namespace
}  // namespace tributary

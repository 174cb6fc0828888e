// Float8 e4m3: the table against the naive decoder, both against known
// values and against ml_dtypes (tests/fixtures/fp8/e4m3_vectors.json,
// written by tools/fp8/e4m3_vectors.py); the round-to-nearest-even encoder;
// the block quantizer and dequantizer of Qwen's FP8 checkpoints.
#include "engine/model/fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "base/mapped_file.h"
#include "nlohmann/json.hpp"

namespace tributary {
namespace {

bool SameBits(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

TEST(E4m3Test, TableEqualsReferenceForAll256Codes) {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<uint8_t>(c);
    EXPECT_TRUE(SameBits(E4m3ToF32(code), E4m3ToF32Reference(code)))
        << "code " << c;
  }
}

TEST(E4m3Test, KnownValues) {
  EXPECT_TRUE(SameBits(E4m3ToF32(0x00), 0.0f));
  EXPECT_TRUE(SameBits(E4m3ToF32(0x80), -0.0f));
  EXPECT_EQ(E4m3ToF32(0x38), 1.0f);
  EXPECT_EQ(E4m3ToF32(0xB8), -1.0f);
  EXPECT_EQ(E4m3ToF32(0x7E), 448.0f);
  EXPECT_EQ(E4m3ToF32(0xFE), -448.0f);
  EXPECT_TRUE(std::isnan(E4m3ToF32(0x7F)));
  EXPECT_TRUE(std::isnan(E4m3ToF32(0xFF)));
  EXPECT_EQ(E4m3ToF32(0x01), std::ldexp(1.0f, -9));   // smallest subnormal
  EXPECT_EQ(E4m3ToF32(0x07), 7 * std::ldexp(1.0f, -9));  // largest subnormal
  EXPECT_EQ(E4m3ToF32(0x08), std::ldexp(1.0f, -6));   // smallest normal
  EXPECT_EQ(E4m3ToF32(0x3C), 1.5f);
  EXPECT_EQ(E4m3ToF32(0x78), 256.0f);  // exponent 15 is finite (no inf)
  for (int c = 0; c < 128; ++c) {  // the sign bit only flips the sign
    const float p = E4m3ToF32(static_cast<uint8_t>(c));
    const float n = E4m3ToF32(static_cast<uint8_t>(c | 0x80));
    if (std::isnan(p)) {
      EXPECT_TRUE(std::isnan(n));
    } else {
      EXPECT_TRUE(SameBits(n, -p)) << c;
    }
  }
  for (int c = 1; c < 0x7F; ++c) {  // magnitudes increase with the code
    EXPECT_LT(E4m3ToF32(static_cast<uint8_t>(c - 1)),
              E4m3ToF32(static_cast<uint8_t>(c)));
  }
}

TEST(E4m3Test, EncoderRoundsToNearestEvenAndSaturates) {
  for (int c = 0; c < 256; ++c) {  // every finite code round-trips
    if ((c & 0x7F) == 0x7F) continue;
    EXPECT_EQ(F32ToE4m3(E4m3ToF32(static_cast<uint8_t>(c))), c) << c;
  }
  EXPECT_EQ(F32ToE4m3(1.0625f), 0x38);   // tie between 1 and 1.125: even
  EXPECT_EQ(F32ToE4m3(1.1875f), 0x3A);   // tie between 1.125 and 1.25: even
  EXPECT_EQ(F32ToE4m3(1.07f), 0x39);
  EXPECT_EQ(F32ToE4m3(std::ldexp(1.0f, -10)), 0x00);  // half the subnormal: even
  EXPECT_EQ(F32ToE4m3(std::ldexp(3.0f, -10)), 0x02);  // 1.5 subnormals: even
  EXPECT_EQ(F32ToE4m3(1000.0f), 0x7E);
  EXPECT_EQ(F32ToE4m3(-1e30f), 0xFE);
  EXPECT_EQ(F32ToE4m3(INFINITY), 0x7E);
  EXPECT_EQ(F32ToE4m3(NAN), 0x7F);
}

TEST(E4m3Test, MatchesMlDtypes) {
  absl::StatusOr<std::string> text = ReadFileToString(
      std::string(TRIBUTARY_SOURCE_DIR) + "/tests/fixtures/fp8/e4m3_vectors.json");
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json vectors = nlohmann::json::parse(*text);
  const auto& decode = vectors.at("decode");
  ASSERT_EQ(decode.size(), 256u);
  for (int c = 0; c < 256; ++c) {
    const std::string s = decode[c].get<std::string>();
    const float expected =
        s == "nan" ? NAN : std::strtof(s.c_str(), nullptr);
    EXPECT_TRUE(SameBits(E4m3ToF32Reference(static_cast<uint8_t>(c)), expected))
        << "code " << c << ": ml_dtypes " << s;
  }
  const auto& encode = vectors.at("encode");
  ASSERT_GT(encode.size(), 1000u);
  for (const auto& pair : encode) {
    const auto bits = pair[0].get<uint32_t>();
    float x;
    std::memcpy(&x, &bits, 4);
    EXPECT_EQ(F32ToE4m3(x), pair[1].get<int>()) << "x = " << x;
  }
}

TEST(Fp8BlockTest, QuantizeDequantizeWithinTheFormatsBound) {
  // 200 x 300: ceil-divided blocks 2 x 3, the last ones partial.
  const int64_t rows = 200, cols = 300;
  std::mt19937 rng(40);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> w(rows * cols);
  for (float& v : w) v = normal(rng);
  w[5] = 0.9f;  // an outlier: its block's scale is large
  for (int64_t j = 256; j < cols; ++j) {
    for (int64_t i = 128; i < rows; ++i) w[i * cols + j] = 0.0f;  // zero block
  }
  const Fp8BlockWeight q = QuantizeFp8Block(w.data(), rows, cols, 128, 128);
  ASSERT_EQ(q.scale_inv.size(), 6u);
  EXPECT_EQ(q.scale_inv[5], 1.0f);  // the all-zero block
  EXPECT_FLOAT_EQ(q.scale_inv[0], 0.9f / 448.0f);
  std::vector<float> dq(rows * cols);
  DequantizeFp8Block(
      q.q.data(), rows, cols, 128, 128,
      [&](int64_t bi, int64_t bj) { return q.scale_inv[bi * 3 + bj]; },
      [&](int64_t k, float v) { dq[k] = v; });
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const float s = q.scale_inv[(i / 128) * 3 + j / 128];
      const float x = w[i * cols + j], y = dq[i * cols + j];
      // Half an ulp of e4m3: 2^-4 relative for normals, 2^-10 * s below.
      const float bound = std::fmax(std::fabs(x) * 0.0625f, s * 0.0009765625f);
      ASSERT_LE(std::fabs(x - y), bound * 1.0001f) << i << ", " << j;
    }
  }
  EXPECT_EQ(dq[5], 0.9f);  // the block maximum is exact (448 * s)
}

}  // namespace
}  // namespace tributary

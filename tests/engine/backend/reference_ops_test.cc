// Behavioural tests of the reference ops against independent formulations
// (double precision, dense instead of paged, closed forms).
#include "engine/backend/cpu/reference_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace tributary {
namespace reference {
namespace {

std::vector<float> RandomVector(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(MatMulTest, SameResultForEachWeightDType) {
  // Weights that bf16, f16 and f32 all represent exactly.
  const int64_t t = 3, in = 5, out = 4;
  std::vector<float> w32(out * in);
  std::vector<uint16_t> wbf(out * in), wf16(out * in);
  for (int64_t i = 0; i < out * in; ++i) {
    w32[i] = static_cast<float>(i % 7 - 3) * 0.25f;
    wbf[i] = F32ToBf16(w32[i]);
  }
  // f16 bits of multiples of 0.25 in [-0.75, 0.75].
  for (int64_t i = 0; i < out * in; ++i) {
    const float v = w32[i];
    uint16_t bits = 0;
    if (v == 0.0f) bits = 0;
    else {
      const float a = std::fabs(v);
      const int e = static_cast<int>(std::floor(std::log2(a)));
      const int mant = static_cast<int>((a / std::ldexp(1.0f, e) - 1.0f) * 1024);
      bits = static_cast<uint16_t>(((e + 15) << 10) | mant);
      if (v < 0) bits |= 0x8000;
    }
    wf16[i] = bits;
    ASSERT_EQ(F16ToF32(bits), v);
  }
  std::mt19937 rng(1);
  auto x = RandomVector(t * in, rng);
  std::vector<float> y32(t * out), ybf(t * out), yf16(t * out);
  MatMul(x.data(), t, in, w32.data(), ElementType::kF32, out, y32.data());
  MatMul(x.data(), t, in, wbf.data(), ElementType::kBF16, out, ybf.data());
  MatMul(x.data(), t, in, wf16.data(), ElementType::kF16, out, yf16.data());
  EXPECT_EQ(y32, ybf);
  EXPECT_EQ(y32, yf16);
  for (int64_t r = 0; r < t; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double expect = 0;
      for (int64_t i = 0; i < in; ++i) expect += double{x[r * in + i]} * w32[o * in + i];
      EXPECT_NEAR(y32[r * out + o], expect, 1e-5);
    }
  }
}

TEST(ArgMaxRowTest, LowestIndexOfTheLargestAndMinusOneWhenNotFinite) {
  EXPECT_EQ(ArgMaxRow(std::vector<float>{1, 3, -2, 3, 0}.data(), 5), 1);
  EXPECT_EQ(ArgMaxRow(std::vector<float>{-5, -4, -4}.data(), 3), 1);
  EXPECT_EQ(ArgMaxRow(std::vector<float>{7}.data(), 1), 0);
  EXPECT_EQ(ArgMaxRow(std::vector<float>{1, NAN, 2}.data(), 3), -1);
  EXPECT_EQ(ArgMaxRow(std::vector<float>{1, 2, INFINITY}.data(), 3), -1);
  EXPECT_EQ(ArgMaxRow(std::vector<float>{-INFINITY, 2}.data(), 2), -1);
  EXPECT_EQ(ArgMaxRow(nullptr, 0), -1);
}

TEST(RmsNormTest, ZeroCentredWeightOfZeroGivesUnitRms) {
  std::mt19937 rng(2);
  const int64_t rows = 4, dim = 24;
  auto x = RandomVector(rows * dim, rng, 3.0f);
  std::vector<float> w(dim, 0.0f), out(rows * dim);
  RmsNormZeroCentred(x.data(), rows, dim, w.data(), ElementType::kF32, 1e-6f, out.data());
  for (int64_t r = 0; r < rows; ++r) {
    double ms = 0;
    for (int64_t i = 0; i < dim; ++i) ms += out[r * dim + i] * out[r * dim + i];
    EXPECT_NEAR(ms / dim, 1.0, 1e-5);
  }
  // A weight w scales by (1 + w), not by w.
  std::vector<float> w2(dim, 1.0f), out2(rows * dim);
  RmsNormZeroCentred(x.data(), rows, dim, w2.data(), ElementType::kF32, 1e-6f, out2.data());
  for (int64_t i = 0; i < rows * dim; ++i) EXPECT_FLOAT_EQ(out2[i], 2 * out[i]);
}

TEST(RmsNormTest, GatedNormUsesPlainWeightAndSiluGate) {
  const int64_t dim = 4;
  const float o[] = {1, -1, 1, -1};  // rms 1
  const float z[] = {0, 100, -100, 1};
  const float w[] = {1, 2, 3, 4};
  float out[4];
  GatedRmsNorm(o, z, 1, dim, w, ElementType::kF32, 0.0f, out);
  EXPECT_FLOAT_EQ(out[0], 0.0f);                 // silu(0) = 0
  EXPECT_NEAR(out[1], -2.0f * 100.0f, 1e-3);     // silu(100) ≈ 100
  EXPECT_NEAR(out[2], 0.0f, 1e-30);              // silu(−100) ≈ 0
  EXPECT_NEAR(out[3], -4.0f * (1.0f / (1.0f + std::exp(-1.0f))), 1e-6);
}

TEST(RopeTest, RotatesOnlyRotaryDimsAndKeepsRelativePositions) {
  std::mt19937 rng(3);
  const int64_t heads = 2, head_dim = 12, rotary = 6;
  const float theta = 10000.0f;
  auto q = RandomVector(heads * head_dim, rng);
  auto k = RandomVector(heads * head_dim, rng);
  auto rotated_dot = [&](int32_t pq, int32_t pk) {
    auto qq = q, kk = k;
    PartialRopeNeox(qq.data(), 1, heads, head_dim, rotary, &pq, theta);
    PartialRopeNeox(kk.data(), 1, heads, head_dim, rotary, &pk, theta);
    // Pass-through dims are untouched.
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = rotary; i < head_dim; ++i) {
        EXPECT_EQ(qq[h * head_dim + i], q[h * head_dim + i]);
      }
    }
    double dot = 0;
    for (int64_t i = 0; i < rotary; ++i) dot += double{qq[i]} * kk[i];
    return dot;
  };
  // Position 0 is the identity.
  auto q0 = q;
  int32_t zero = 0;
  PartialRopeNeox(q0.data(), 1, heads, head_dim, rotary, &zero, theta);
  EXPECT_EQ(q0, q);
  // The score depends only on the distance between positions.
  EXPECT_NEAR(rotated_dot(7, 3), rotated_dot(104, 100), 1e-4);
  EXPECT_NEAR(rotated_dot(3, 7), rotated_dot(50, 54), 1e-4);
  EXPECT_GT(std::fabs(rotated_dot(7, 3) - rotated_dot(3, 7)), 1e-4);
}

TEST(RopeTest, NeoxPairsDimensionIWithIPlusHalf) {
  // One head, rotary_dim 4 (half 2): dims (0, 2) and (1, 3) rotate together.
  float x[4] = {1, 0, 0, 0};
  int32_t pos = 1;
  PartialRopeNeox(x, 1, 1, 4, 4, &pos, 10000.0f);
  EXPECT_NEAR(x[0], std::cos(1.0f), 1e-6);
  EXPECT_NEAR(x[2], std::sin(1.0f), 1e-6);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_EQ(x[3], 0.0f);
}

TEST(ResidualAddTest, StatsMatchDirectComputation) {
  const int64_t hidden = 5;
  float x[] = {3, 0, 4, 0, 0, 0, 0, 0, 0, 0};
  const float u[] = {0, 0, 0, 0, -12, 1, 0, 0, 0, 0};
  ResidualTokenStats stats[2];
  ResidualAdd(x, u, 2, hidden, stats);
  EXPECT_FLOAT_EQ(stats[0].stream_norm, 5.0f);
  EXPECT_FLOAT_EQ(stats[0].update_norm, 12.0f);
  EXPECT_FLOAT_EQ(stats[0].sum_norm, 13.0f);
  EXPECT_FLOAT_EQ(stats[0].max_abs, 12.0f);
  EXPECT_EQ(stats[0].max_abs_dim, 4);
  EXPECT_FALSE(stats[0].nonfinite);
  EXPECT_FLOAT_EQ(x[4], -12.0f);
  // A zero stream is legal (untrained embedding row).
  EXPECT_FLOAT_EQ(stats[1].stream_norm, 0.0f);
  EXPECT_FLOAT_EQ(stats[1].update_norm, 1.0f);
  float y[] = {1, 2};
  const float bad[] = {NAN, 0};
  ResidualAdd(y, bad, 1, 2, stats);
  EXPECT_TRUE(stats[0].nonfinite);
}

TEST(GdnGatesTest, DecayAndBeta) {
  const float a[] = {0.0f, 30.0f};
  const float b[] = {0.0f, 2.0f};
  const float a_log[] = {std::log(2.0f)};
  const float dt_bias[] = {1.0f};
  float g[2], beta[2];
  GdnGates(a, b, 2, 1, a_log, ElementType::kF32, dt_bias, ElementType::kF32, g, beta);
  EXPECT_NEAR(g[0], -2.0f * std::log1p(std::exp(1.0f)), 1e-6);
  EXPECT_NEAR(g[1], -2.0f * 31.0f, 1e-4);  // softplus linear above 20
  EXPECT_FLOAT_EQ(beta[0], 0.5f);
  EXPECT_NEAR(beta[1], 1.0f / (1.0f + std::exp(-2.0f)), 1e-7);
}

TEST(ConvTest, MatchesZeroPaddedFormulaAndSplitsAnywhere) {
  std::mt19937 rng(4);
  const int64_t tokens = 9, channels = 3, kernel = 4;
  auto x = RandomVector(tokens * channels, rng);
  auto w = RandomVector(channels * kernel, rng);
  std::vector<float> window((kernel - 1) * channels, 0.0f), out(tokens * channels);
  CausalConv1dSilu(x.data(), tokens, channels, kernel, w.data(), ElementType::kF32,
                   window.data(), out.data());
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < channels; ++c) {
      double sum = 0;
      for (int64_t j = 0; j < kernel; ++j) {
        const int64_t s = t - (kernel - 1) + j;
        if (s >= 0) sum += double{w[c * kernel + j]} * x[s * channels + c];
      }
      EXPECT_NEAR(out[t * channels + c], sum / (1 + std::exp(-sum)), 1e-5);
    }
  }
  // Feeding the same tokens in pieces (1, 2, 6) through the window gives the
  // same outputs and the same final window.
  std::vector<float> window2((kernel - 1) * channels, 0.0f), out2(tokens * channels);
  int64_t start = 0;
  for (int64_t piece : {1, 2, 6}) {
    CausalConv1dSilu(x.data() + start * channels, piece, channels, kernel,
                     w.data(), ElementType::kF32, window2.data(),
                     out2.data() + start * channels);
    start += piece;
  }
  EXPECT_EQ(out, out2);
  EXPECT_EQ(window, window2);
  for (int64_t c = 0; c < channels; ++c) {  // window = last 3 inputs
    EXPECT_EQ(window[2 * channels + c], x[8 * channels + c]);
    EXPECT_EQ(window[0 * channels + c], x[6 * channels + c]);
  }
}

TEST(PagedAttentionTest, EqualsDenseCausalAttention) {
  std::mt19937 rng(5);
  const int64_t q_heads = 6, kv_heads = 2, d = 10, block = 4, tokens = 11;
  const int64_t num_blocks = 8;
  // A scrambled block table: logical block i → physical block.
  std::vector<int32_t> table = {5, 2, 7};
  std::vector<float> k_pool(num_blocks * block * kv_heads * d, NAN);
  std::vector<float> v_pool(k_pool.size(), NAN);
  auto q = RandomVector(tokens * q_heads * d, rng);
  auto k = RandomVector(tokens * kv_heads * d, rng);
  auto v = RandomVector(tokens * kv_heads * d, rng);
  // Prefill 7 tokens, then 4 more in a second call (a continuation).
  WriteKv(k.data(), v.data(), 7, 0, table.data(), block, kv_heads, d,
          k_pool.data(), v_pool.data());
  WriteKv(k.data() + 7 * kv_heads * d, v.data() + 7 * kv_heads * d, 4, 7,
          table.data(), block, kv_heads, d, k_pool.data(), v_pool.data());
  PagedKvView view{k_pool.data(), v_pool.data(), table.data(), block, kv_heads, d};
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> out(tokens * q_heads * d);
  PagedAttention(q.data(), 7, q_heads, 0, view, scale, out.data());
  PagedAttention(q.data() + 7 * q_heads * d, 4, q_heads, 7, view, scale,
                 out.data() + 7 * q_heads * d);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < q_heads; ++h) {
      const int64_t kvh = h / (q_heads / kv_heads);
      std::vector<double> p(t + 1);
      double max_s = -1e300, total = 0;
      for (int64_t s = 0; s <= t; ++s) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) {
          dot += double{q[(t * q_heads + h) * d + i]} * k[(s * kv_heads + kvh) * d + i];
        }
        p[s] = dot * scale;
        max_s = std::max(max_s, p[s]);
      }
      for (double& x : p) total += (x = std::exp(x - max_s));
      for (int64_t i = 0; i < d; ++i) {
        double expect = 0;
        for (int64_t s = 0; s <= t; ++s) {
          expect += p[s] / total * v[(s * kv_heads + kvh) * d + i];
        }
        EXPECT_NEAR(out[(t * q_heads + h) * d + i], expect, 1e-5)
            << "t=" << t << " h=" << h << " i=" << i;
      }
    }
  }
}

}  // namespace
}  // namespace reference
}  // namespace tributary

// The fast CPU matmul against reference::MatMul (its naive twin), on every
// instruction-set path this machine has, plus its determinism guarantees:
// bit-for-bit batch invariance, thread-count and blocking invariance, and
// identical bits across paths.
#include "engine/backend/cpu/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cpu/matmul_kernels.h"
#include "engine/backend/cpu/reference_ops.h"
#include "engine/backend/cpu/thread_pool.h"

namespace tributary {
namespace {

const CpuIsa kAllIsas[] = {CpuIsa::kScalar, CpuIsa::kAvx2,
                              CpuIsa::kAvx512};
const ElementType kAllTypes[] = {ElementType::kF32, ElementType::kBF16,
                                 ElementType::kF16};

std::vector<CpuIsa> SupportedIsas() {
  std::vector<CpuIsa> isas;
  for (CpuIsa isa : kAllIsas) {
    if (CpuIsaSupported(isa)) isas.push_back(isa);
  }
  return isas;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Weights stored as `type` (raw bytes), from random values.
std::vector<uint8_t> RandomWeights(ElementType type, size_t n, uint32_t seed) {
  const std::vector<float> f = RandomFloats(n, seed);
  std::vector<uint8_t> bytes(n * ElementTypeSizeBytes(type));
  for (size_t i = 0; i < n; ++i) {
    if (type == ElementType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &f[i], 4);
    } else {
      uint16_t h;
      if (type == ElementType::kBF16) {
        h = F32ToBf16(f[i]);
      } else {
        // f16 of a value in a safe range: through bf16's top bits is not
        // enough, so build it from a small integer grid plus a fraction.
        const float v = std::round(f[i] * 512.0f) / 512.0f;  // |v| < ~8
        const float a = std::fabs(v);
        if (a == 0.0f) {
          h = 0;
        } else {
          int e;
          const float m = std::frexp(a, &e);  // a = m · 2^e, m in [0.5, 1)
          // Normal half: a = (1 + frac/1024) · 2^(exp − 15), exp = e − 1 + 15.
          const uint32_t exp = static_cast<uint32_t>(e - 1 + 15);
          const uint32_t frac =
              static_cast<uint32_t>(std::lround((m * 2.0f - 1.0f) * 1024.0f));
          h = static_cast<uint16_t>((exp << 10) + frac);  // frac 1024 carries
        }
        if (v < 0) h |= 0x8000;
      }
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
  return bytes;
}

struct Shape {
  int64_t tokens, in, out;
};

std::string Describe(CpuIsa isa, ElementType type, const Shape& s,
                     int threads) {
  return std::string(CpuIsaName(isa)) + " " + ElementTypeName(type) +
         " T=" + std::to_string(s.tokens) + " in=" + std::to_string(s.in) +
         " out=" + std::to_string(s.out) +
         " threads=" + std::to_string(threads);
}

// Per token row: max |a − b| <= tol · max |ref| (design.md §7).
void ExpectClose(const std::vector<float>& got, const std::vector<float>& ref,
                 const Shape& s, float tol, const std::string& what) {
  for (int64_t t = 0; t < s.tokens; ++t) {
    float max_ref = 0.0f, max_diff = 0.0f;
    for (int64_t o = 0; o < s.out; ++o) {
      const size_t i = static_cast<size_t>(t * s.out + o);
      max_ref = std::max(max_ref, std::fabs(ref[i]));
      max_diff = std::max(max_diff, std::fabs(got[i] - ref[i]));
    }
    ASSERT_LE(max_diff, tol * max_ref) << what << " token " << t;
  }
}

std::vector<float> RunMatMul(
    CpuIsa isa, const std::vector<float>& x, const Shape& s,
    const std::vector<uint8_t>& w, ElementType type, ThreadPool* pool,
    MatMulPrecision precision = MatMulPrecision::kF32) {
  std::vector<float> y(static_cast<size_t>(s.tokens * s.out), -1.0f);
  MatMulWithIsa(isa, x.data(), s.tokens, s.in, w.data(), type, s.out, y.data(),
                pool, precision);
  return y;
}

TEST(MatMulTest, F16TestWeightsAreExact) {
  // The f16 generator above must produce the value it was given.
  const std::vector<uint8_t> w = RandomWeights(ElementType::kF16, 1000, 3);
  const std::vector<float> f = RandomFloats(1000, 3);
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(LoadAsF32(w.data(), ElementType::kF16, i),
              std::round(f[i] * 512.0f) / 512.0f);
  }
}

TEST(MatMulTest, AutoPathIsSupported) {
  EXPECT_TRUE(CpuIsaSupported(BestCpuIsa()));
  EXPECT_NE(BestCpuIsa(), CpuIsa::kAuto);
}

TEST(MatMulTest, MatchesReferenceOnEveryPathTypeAndOddShape) {
  ThreadPool pool(2);
  const Shape shapes[] = {
      {1, 1, 1},      {1, 5, 7},     {2, 17, 33},   {3, 31, 15},
      {7, 33, 65},    {16, 64, 31},  {17, 100, 47}, {64, 300, 70},
      {130, 257, 97}, {9, 600, 130}, {1, 4500, 35}, {5, 5000, 17},
      // Prefill in input segments (K-blocking) where the path's share of L1
      // makes them (AVX-512 on a 48 KiB L1: 1024 + 76 and 1024 + 16
      // inputs), and with more rows than one pack block (232 at K = 1100 on
      // a 2 MiB L2), so that the carried lanes of a whole block are used.
      {20, 1100, 50}, {7, 1040, 9}, {20, 1100, 600},
  };
  for (const Shape& s : shapes) {
    const std::vector<float> x = RandomFloats(s.tokens * s.in, 11);
    for (ElementType type : kAllTypes) {
      const std::vector<uint8_t> w = RandomWeights(type, s.in * s.out, 12);
      std::vector<float> ref(s.tokens * s.out);
      reference::MatMul(x.data(), s.tokens, s.in, w.data(), type, s.out,
                        ref.data());
      for (CpuIsa isa : SupportedIsas()) {
        ExpectClose(RunMatMul(isa, x, s, w, type, &pool), ref, s, 1e-5f,
                    Describe(isa, type, s, 2));
      }
    }
  }
}

TEST(MatMulTest, DefaultEntryPointMatchesReference) {
  const Shape s{17, 130, 45};
  const std::vector<float> x = RandomFloats(s.tokens * s.in, 1);
  const std::vector<uint8_t> w =
      RandomWeights(ElementType::kBF16, s.in * s.out, 2);
  std::vector<float> ref(s.tokens * s.out), y(s.tokens * s.out);
  reference::MatMul(x.data(), s.tokens, s.in, w.data(), ElementType::kBF16,
                    s.out, ref.data());
  MatMul(x.data(), s.tokens, s.in, w.data(), ElementType::kBF16, s.out,
         y.data(), nullptr);
  ExpectClose(y, ref, s, 1e-5f, "auto");
}

TEST(MatMulTest, ZeroInFeaturesGivesZeros) {
  for (MatMulPrecision precision :
       {MatMulPrecision::kF32, MatMulPrecision::kBF16}) {
    std::vector<float> y(6, 5.0f);
    const float x = 0.0f;
    const uint16_t w = 0;
    MatMul(&x, 2, 0, &w, ElementType::kBF16, 3, y.data(), nullptr, precision);
    for (float v : y) EXPECT_EQ(v, 0.0f);
    // No outputs: nothing written (y stays as it was).
    std::vector<float> untouched(6, 5.0f);
    MatMul(&x, 2, 0, &w, ElementType::kBF16, 0, untouched.data(), nullptr,
           precision);
    MatMul(&x, 2, 0, &w, ElementType::kBF16, -3, untouched.data(), nullptr,
           precision);
    for (float v : untouched) EXPECT_EQ(v, 5.0f);
  }
}

// A token's output must not depend on the other tokens of the call, nor on
// how many there are: compare every way of cutting 130 tokens into calls,
// bit for bit, on the same path. Decode-sized calls run each dot product
// in one pass; larger ones, where the path's share of L1 says so (AVX-512 on
// a 48 KiB L1), in input segments carrying their lanes (1024 + 76 inputs),
// so this also checks that the segments give one pass's bits.
TEST(MatMulTest, BatchInvariantBitForBit) {
  ThreadPool pool(2);
  const Shape full{130, 1100, 77};  // a partial row tile too
  const std::vector<float> x = RandomFloats(full.tokens * full.in, 5);
  for (ElementType type : kAllTypes) {
    const std::vector<uint8_t> w = RandomWeights(type, full.in * full.out, 6);
    for (CpuIsa isa : SupportedIsas()) {
      const std::vector<float> y_full = RunMatMul(isa, x, full, w, type, &pool);
      for (int64_t step : {1, 2, 3, 4, 7, 16, 17, 64}) {
        for (int64_t t0 = 0; t0 < full.tokens; t0 += step) {
          const int64_t n = std::min(step, full.tokens - t0);
          const Shape part{n, full.in, full.out};
          std::vector<float> xp(x.begin() + t0 * full.in,
                                x.begin() + (t0 + n) * full.in);
          const std::vector<float> yp =
              RunMatMul(isa, xp, part, w, type, &pool);
          ASSERT_EQ(0, std::memcmp(yp.data(), y_full.data() + t0 * full.out,
                                   yp.size() * sizeof(float)))
              << Describe(isa, type, part, 2) << " tokens from " << t0;
        }
      }
    }
  }
}

TEST(MatMulTest, SameBitsForAnyThreadCount) {
  ThreadPool pool1(1), pool2(2), pool3(3), pool5(5);
  ThreadPool* pools[] = {&pool1, &pool2, &pool3, &pool5};
  for (const Shape& s :
       {Shape{1, 1024, 700}, Shape{40, 300, 333}, Shape{40, 700, 333}}) {
    const std::vector<float> x = RandomFloats(s.tokens * s.in, 8);
    const std::vector<uint8_t> w =
        RandomWeights(ElementType::kBF16, s.in * s.out, 9);
    for (CpuIsa isa : SupportedIsas()) {
      const std::vector<float> y0 =
          RunMatMul(isa, x, s, w, ElementType::kBF16, nullptr);
      for (ThreadPool* pool : pools) {
        EXPECT_EQ(y0, RunMatMul(isa, x, s, w, ElementType::kBF16, pool))
            << Describe(isa, ElementType::kBF16, s, pool->num_threads());
      }
    }
  }
}

// Every path is one fma chain per output in input order, so they agree bit
// for bit (a property, not just a tolerance).
TEST(MatMulTest, AllPathsGiveTheSameBits) {
  ThreadPool pool(2);
  // One pass over the inputs, and prefill in input segments where the
  // path's share of L1 says so (MatMulKernelsTest checks every path's
  // tiles in segments).
  for (const Shape& s : {Shape{19, 333, 101}, Shape{19, 1100, 37}}) {
    const std::vector<float> x = RandomFloats(s.tokens * s.in, 21);
    for (ElementType type : kAllTypes) {
      const std::vector<uint8_t> w = RandomWeights(type, s.in * s.out, 22);
      const std::vector<float> scalar =
          RunMatMul(CpuIsa::kScalar, x, s, w, type, &pool);
      for (CpuIsa isa : SupportedIsas()) {
        EXPECT_EQ(scalar, RunMatMul(isa, x, s, w, type, &pool))
            << Describe(isa, type, s, 2);
      }
    }
  }
}

TEST(MatMulTest, UnsupportedPathFallsBackToScalar) {
  // Whatever the machine, asking for any path gives the reference's answer.
  const Shape s{3, 20, 9};
  const std::vector<float> x = RandomFloats(s.tokens * s.in, 4);
  const std::vector<uint8_t> w =
      RandomWeights(ElementType::kF32, s.in * s.out, 4);
  std::vector<float> ref(s.tokens * s.out);
  reference::MatMul(x.data(), s.tokens, s.in, w.data(), ElementType::kF32,
                    s.out, ref.data());
  for (CpuIsa isa : kAllIsas) {
    ExpectClose(RunMatMul(isa, x, s, w, ElementType::kF32, nullptr), ref, s,
                1e-5f, CpuIsaName(isa));
  }
}

// One pass over several products of one x gives each product's own bits,
// whatever mix of weight types, precisions and sizes (tiny ones included).
TEST(MatMulTest, SharedInputGivesEachProductsBits) {
  ThreadPool pool(2);
  for (const int64_t tokens : {int64_t{1}, int64_t{5}, int64_t{40}}) {
    const int64_t in = 300;
    const std::vector<float> x = RandomFloats(tokens * in, 61);
    const int64_t outs[] = {512, 8, 3, 130};
    const ElementType types[] = {ElementType::kBF16, ElementType::kBF16,
                                 ElementType::kF32, ElementType::kF16};
    std::vector<std::vector<uint8_t>> ws;
    for (int i = 0; i < 4; ++i) {
      ws.push_back(RandomWeights(types[i], in * outs[i], 62 + i));
    }
    for (MatMulPrecision precision :
         {MatMulPrecision::kF32, MatMulPrecision::kBF16}) {
      std::vector<std::vector<float>> ys;
      MatMulOutput outputs[4];
      for (int i = 0; i < 4; ++i) {
        ys.emplace_back(tokens * outs[i], -1.0f);
        outputs[i] = {ws[i].data(), types[i], outs[i], ys[i].data()};
      }
      MatMulShared(x.data(), tokens, in, outputs, 4, &pool, precision);
      // Products with no outputs are skipped, wherever they sit.
      MatMulOutput with_empty[3] = {
          outputs[0], {ws[1].data(), types[1], 0, nullptr}, outputs[3]};
      MatMulShared(x.data(), tokens, in, with_empty, 3, &pool, precision);
      for (int i = 0; i < 4; ++i) {
        const Shape s{tokens, in, outs[i]};
        EXPECT_EQ(ys[i], RunMatMul(CpuIsa::kAuto, x, s, ws[i], types[i],
                                   nullptr, precision))
            << "product " << i << " T=" << tokens << " "
            << MatMulPrecisionName(precision);
      }
    }
  }
}

// ---- MatMulPrecision::kBF16: x rounded to bf16, VDPBF16PS's pair chains ----

// The bf16 products in double, from x rounded to bf16 (an independent check
// of what the twin computes, up to the order of its f32 sums).
std::vector<double> Bf16ProductsInDouble(const std::vector<float>& x,
                                         const Shape& s,
                                         const std::vector<uint8_t>& w) {
  std::vector<double> y(static_cast<size_t>(s.tokens * s.out));
  for (int64_t t = 0; t < s.tokens; ++t) {
    for (int64_t o = 0; o < s.out; ++o) {
      double sum = 0.0;
      for (int64_t i = 0; i < s.in; ++i) {
        sum += static_cast<double>(Bf16ToF32(F32ToBf16(x[t * s.in + i]))) *
               LoadAsF32(w.data(), ElementType::kBF16,
                         static_cast<size_t>(o * s.in + i));
      }
      y[t * s.out + o] = sum;
    }
  }
  return y;
}

std::vector<CpuIsa> Bf16Paths() {
  // kScalar is the naive twin; kAvx512 runs VDPBF16PS where the CPU has it.
  std::vector<CpuIsa> isas = {CpuIsa::kScalar};
  if (MatMulBf16DotSupported()) isas.push_back(CpuIsa::kAvx512);
  return isas;
}

const matmul_internal::MatMulKernels& KernelsOf(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return matmul_internal::Avx512Kernels();
    case CpuIsa::kAvx2:
      return matmul_internal::Avx2Kernels();
    default:
      return matmul_internal::ScalarKernels();
  }
}

// Every path's tile, run over a dot product's inputs in segments that carry
// the 16 lanes from one to the next, gives the bits of one pass: what
// prefill's K-blocking relies on. Checked on the tiles themselves, since
// which paths the driver segments depends on this machine's L1.
TEST(MatMulKernelsTest, SegmentsCarryingLanesGiveOnePassBits) {
  constexpr int64_t kK = 1100;  // segments of 512, 512 and 76 (a part chunk)
  constexpr int64_t kSegment = 512;
  for (CpuIsa isa : SupportedIsas()) {
    const matmul_internal::MatMulKernels& kern = KernelsOf(isa);
    for (ElementType type : kAllTypes) {
      for (int m = 1; m <= kern.mr; ++m) {
        const int nr = kern.nr[m];
        const std::vector<float> x = RandomFloats(m * kK, 40 + m);
        const std::vector<uint8_t> w =
            RandomWeights(type, static_cast<size_t>(nr * kK), 41 + m);
        const size_t row_bytes = kK * ElementTypeSizeBytes(type);
        std::vector<const void*> rows(static_cast<size_t>(nr));
        for (int r = 0; r < nr; ++r) rows[r] = w.data() + r * row_bytes;
        std::vector<float> one_pass(static_cast<size_t>(m * nr), -1.0f);
        kern.tile(m, x.data(), kK, rows.data(), type, kK, one_pass.data(), nr,
                  nr, nullptr, nullptr, nullptr);
        std::vector<float> segmented(one_pass.size(), -2.0f);
        std::vector<float> lanes(static_cast<size_t>(m * nr * 16), -3.0f);
        for (int64_t s0 = 0; s0 < kK; s0 += kSegment) {
          const int64_t len = std::min(kSegment, kK - s0);
          std::vector<const void*> seg_rows(rows.size());
          for (int r = 0; r < nr; ++r) {
            seg_rows[r] = static_cast<const uint8_t*>(rows[r]) +
                          s0 * static_cast<int64_t>(ElementTypeSizeBytes(type));
          }
          kern.tile(m, x.data() + s0, kK, seg_rows.data(), type, len,
                    segmented.data(), nr, nr, nullptr,
                    s0 == 0 ? nullptr : lanes.data(),
                    s0 + len == kK ? nullptr : lanes.data());
        }
        EXPECT_EQ(0, std::memcmp(one_pass.data(), segmented.data(),
                                 one_pass.size() * sizeof(float)))
            << CpuIsaName(isa) << " " << ElementTypeName(type)
            << " m=" << m;
      }
    }
  }
}

TEST(MatMulBf16Test, ParsesItsNames) {
  for (MatMulPrecision p : {MatMulPrecision::kF32, MatMulPrecision::kBF16}) {
    absl::StatusOr<MatMulPrecision> parsed =
        ParseMatMulPrecision(MatMulPrecisionName(p));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, p);
  }
  const absl::StatusOr<MatMulPrecision> bad = ParseMatMulPrecision("fp8");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fp8"), std::string::npos);
}

TEST(MatMulBf16Test, IsTheRoundedProductsOnEveryPathAndShape) {
  if (!MatMulBf16DotSupported()) {
    std::printf("no AVX512_BF16 here: the twin alone is checked\n");
  }
  ThreadPool pool(2);
  // Odd K (a zero-padded last pair) and even, decode (one token tile) and
  // prefill token counts, partial tiles and partial groups of 16 rows; K of
  // more than one segment of pairs (2 · kBf16PairsPerSegment) in both
  // (4500, 4101), and exactly one (2048, the boundary).
  const Shape shapes[] = {
      {1, 1, 1},      {1, 31, 7},     {2, 32, 33},   {3, 33, 15},
      {7, 63, 65},    {6, 64, 31},    {17, 100, 47}, {64, 300, 70},
      {130, 257, 97}, {9, 600, 130},  {1, 4500, 35}, {5, 1000, 17},
      {20, 4101, 40}, {8, 2048, 200},
  };
  for (const Shape& s : shapes) {
    const std::vector<float> x = RandomFloats(s.tokens * s.in, 31);
    const std::vector<uint8_t> w =
        RandomWeights(ElementType::kBF16, s.in * s.out, 32);
    const std::vector<double> exact = Bf16ProductsInDouble(x, s, w);
    const std::vector<float> twin = RunMatMul(
        CpuIsa::kScalar, x, s, w, ElementType::kBF16, &pool,
        MatMulPrecision::kBF16);
    // f32 sums of |terms| ≈ 1: within a few ulps of the sum's scale.
    for (int64_t t = 0; t < s.tokens; ++t) {
      for (int64_t o = 0; o < s.out; ++o) {
        const size_t i = static_cast<size_t>(t * s.out + o);
        ASSERT_NEAR(twin[i], exact[i], 1e-5 * (std::sqrt(s.in) + 1.0))
            << "twin, T=" << s.tokens << " in=" << s.in << " out=" << s.out
            << " at " << t << "," << o;
      }
    }
    for (CpuIsa isa : Bf16Paths()) {
      EXPECT_EQ(twin, RunMatMul(isa, x, s, w, ElementType::kBF16, &pool,
                                MatMulPrecision::kBF16))
          << Describe(isa, ElementType::kBF16, s, 2);
    }
    // And it is the f32 matmul to bf16 rounding of x.
    std::vector<float> ref(s.tokens * s.out);
    reference::MatMul(x.data(), s.tokens, s.in, w.data(), ElementType::kBF16,
                      s.out, ref.data());
    ExpectClose(twin, ref, s, 2e-2f, "bf16 against f32");
  }
}

// Subnormal inputs read as zero, subnormal sums flush to zero: the twin
// must say so the way the instruction does, on values near the bottom of
// the f32 range (where one flush changes the result).
TEST(MatMulBf16Test, FlushesSubnormalsAsTheInstructionDoes) {
  if (!MatMulBf16DotSupported()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  const Shape s{5, 96, 37};
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> exponent(-75, -55);
  std::normal_distribution<float> mantissa(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 7);
  const auto tiny = [&] {
    // Products of two of these land around 2^-150 .. 2^-110: subnormal and
    // normal f32 sums both; one in eight is a bf16 subnormal itself.
    float v = std::ldexp(mantissa(rng), exponent(rng));
    if (pick(rng) == 0) v = std::ldexp(mantissa(rng), -130);
    return v;
  };
  // Tokens 0 and 1 hold bf16 subnormals only, and every third weight row is
  // large (~2^20): there the products would be normal numbers if the
  // subnormal inputs were not read as zero.
  std::vector<float> x(s.tokens * s.in);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = i < static_cast<size_t>(2 * s.in) ? std::ldexp(mantissa(rng), -130)
                                             : tiny();
  }
  std::vector<uint8_t> w(s.in * s.out * 2);
  for (size_t i = 0; i < static_cast<size_t>(s.in * s.out); ++i) {
    const bool large = (i / s.in) % 3 == 0;
    const uint16_t h =
        F32ToBf16(large ? std::ldexp(mantissa(rng), 20) : tiny());
    std::memcpy(w.data() + 2 * i, &h, 2);
  }
  const std::vector<float> twin = RunMatMul(
      CpuIsa::kScalar, x, s, w, ElementType::kBF16, nullptr,
      MatMulPrecision::kBF16);
  const std::vector<float> fast = RunMatMul(
      CpuIsa::kAvx512, x, s, w, ElementType::kBF16, nullptr,
      MatMulPrecision::kBF16);
  // Without the flushes the sums would be the exact ones to f32 rounding;
  // the test must reach both kinds of output.
  const std::vector<double> exact = Bf16ProductsInDouble(x, s, w);
  int normal = 0, flushed = 0;
  for (size_t i = 0; i < twin.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(&twin[i], &fast[i], sizeof(float)))
        << "output " << i << ": twin " << twin[i] << " instruction "
        << fast[i];
    const double err = std::fabs(twin[i] - exact[i]);
    if (twin[i] != 0.0f && err <= 1e-5 * std::fabs(exact[i])) ++normal;
    if (err > 1e-2 * std::fabs(exact[i])) ++flushed;
  }
  EXPECT_GT(normal, 0);
  EXPECT_GT(flushed, 0);
}

// Sums just below 2^-126: the instruction decides "subnormal" on the sum
// rounded with an unbounded exponent, so 2^-126 − 2^-150 flushes to zero
// where rounding onto the subnormal grid would give 2^-126.
TEST(MatMulBf16Test, FlushesSumsJustBelowTheNormalRange) {
  const auto bf16 = [](float v) {
    const uint16_t h = F32ToBf16(v);
    EXPECT_EQ(Bf16ToF32(h), v);  // exact in bf16
    return h;
  };
  // (x, w) pairs, odd element first: 2^-126 then −2^-150 (exact sum
  // 2^-126 − 2^-150), and neighbours of the boundary.
  struct Case {
    float x0, w0, x1, w1;
  };
  const Case cases[] = {
      {std::ldexp(1.0f, -75), -std::ldexp(1.0f, -75), std::ldexp(1.0f, -63),
       std::ldexp(1.0f, -63)},
      {std::ldexp(1.0f, -76), -std::ldexp(1.0f, -75), std::ldexp(1.0f, -63),
       std::ldexp(1.0f, -63)},
      {std::ldexp(1.0f, -70), -std::ldexp(1.0f, -75), std::ldexp(1.0f, -63),
       std::ldexp(1.0f, -63)},
      {std::ldexp(1.5f, -75), std::ldexp(1.0f, -75), -std::ldexp(1.0f, -63),
       std::ldexp(1.0f, -63)},
      {std::ldexp(1.0f, -60), std::ldexp(1.0f, -66), std::ldexp(1.0f, -60),
       -std::ldexp(1.0f, -66)},
  };
  for (const Case& c : cases) {
    const Shape s{1, 2, 1};
    // x = {x0, x1} and w = {w0, w1}: x as floats that are exact in bf16.
    const std::vector<float> x = {c.x0, c.x1};
    std::vector<uint8_t> w(4);
    const uint16_t h[2] = {bf16(c.w0), bf16(c.w1)};
    std::memcpy(w.data(), h, 4);
    const std::vector<float> twin = RunMatMul(
        CpuIsa::kScalar, x, s, w, ElementType::kBF16, nullptr,
        MatMulPrecision::kBF16);
    if (MatMulBf16DotSupported()) {
      const std::vector<float> fast = RunMatMul(
          CpuIsa::kAvx512, x, s, w, ElementType::kBF16, nullptr,
          MatMulPrecision::kBF16);
      EXPECT_EQ(0, std::memcmp(twin.data(), fast.data(), sizeof(float)))
          << std::hexfloat << "twin " << twin[0] << " instruction " << fast[0];
    }
  }
  // The first case by definition: flushed (its unbounded rounding is
  // 2^-126 − 2^-150 itself, below the normal range).
  const std::vector<float> x = {cases[0].x0, cases[0].x1};
  std::vector<uint8_t> w(4);
  const uint16_t h[2] = {bf16(cases[0].w0), bf16(cases[0].w1)};
  std::memcpy(w.data(), h, 4);
  EXPECT_EQ(RunMatMul(CpuIsa::kScalar, x, Shape{1, 2, 1}, w,
                      ElementType::kBF16, nullptr, MatMulPrecision::kBF16)[0],
            0.0f);
}

TEST(MatMulBf16Test, BatchAndThreadInvariantBitForBit) {
  ThreadPool pool1(1), pool2(2), pool3(3);
  const Shape full{70, 600, 77};
  const std::vector<float> x = RandomFloats(full.tokens * full.in, 41);
  const std::vector<uint8_t> w =
      RandomWeights(ElementType::kBF16, full.in * full.out, 42);
  for (CpuIsa isa : Bf16Paths()) {
    const std::vector<float> y_full = RunMatMul(
        isa, x, full, w, ElementType::kBF16, &pool2, MatMulPrecision::kBF16);
    for (ThreadPool* pool : {&pool1, &pool3}) {
      EXPECT_EQ(y_full, RunMatMul(isa, x, full, w, ElementType::kBF16, pool,
                                  MatMulPrecision::kBF16))
          << CpuIsaName(isa) << " threads " << pool->num_threads();
    }
    for (int64_t step : {1, 2, 5, 6, 7, 33}) {
      for (int64_t t0 = 0; t0 < full.tokens; t0 += step) {
        const int64_t n = std::min(step, full.tokens - t0);
        const Shape part{n, full.in, full.out};
        const std::vector<float> xp(x.begin() + t0 * full.in,
                                    x.begin() + (t0 + n) * full.in);
        const std::vector<float> yp =
            RunMatMul(isa, xp, part, w, ElementType::kBF16, &pool2,
                      MatMulPrecision::kBF16);
        ASSERT_EQ(0, std::memcmp(yp.data(), y_full.data() + t0 * full.out,
                                 yp.size() * sizeof(float)))
            << CpuIsaName(isa) << " tokens from " << t0 << " by " << step;
      }
    }
  }
}

TEST(MatMulBf16Test, PacksPairsWhereTheLayoutSays) {
  // Every element of a matrix of 3 segments (odd K) and 2 groups (the second
  // partial) at the place matmul.h's formula gives, the padding zero.
  const int64_t out = 20, in = 2 * 2 * kBf16PairsPerSegment + 101;
  const int64_t pairs = (in + 1) / 2, groups = 2;
  std::vector<uint16_t> w(static_cast<size_t>(out * in));
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = static_cast<uint16_t>(1 + i % 65521);  // no zero among them
  }
  ASSERT_EQ(Bf16PairsElements(out, in), groups * 16 * pairs * 2);
  ThreadPool pool(2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    std::vector<uint16_t> packed(
        static_cast<size_t>(Bf16PairsElements(out, in)), 0xdead);
    PackBf16Pairs(w.data(), out, in, packed.data(), p);
    std::vector<bool> seen(packed.size(), false);
    for (int64_t o = 0; o < groups * 16; ++o) {
      for (int64_t i = 0; i < pairs * 2; ++i) {
        const int64_t pair = i / 2, seg = pair / kBf16PairsPerSegment;
        const int64_t q = pair - seg * kBf16PairsPerSegment;
        const int64_t len =
            std::min(kBf16PairsPerSegment, pairs - seg * kBf16PairsPerSegment);
        const int64_t at = seg * groups * kBf16PairsPerSegment * 32 +
                           (o / 16) * len * 32 + q * 32 + 2 * (o % 16) + i % 2;
        ASSERT_FALSE(seen[at]) << o << "," << i;
        seen[at] = true;
        const uint16_t want = o < out && i < in ? w[o * in + i] : 0;
        ASSERT_EQ(packed[at], want) << "row " << o << " input " << i;
      }
    }
  }
}

TEST(MatMulBf16Test, PackedWeightsGiveTheStoredRowsBits) {
  ThreadPool pool(2);
  for (const Shape& s : {Shape{1, 257, 45}, Shape{33, 2500, 50}}) {
    const std::vector<float> x = RandomFloats(s.tokens * s.in, 61);
    const std::vector<uint8_t> w =
        RandomWeights(ElementType::kBF16, s.in * s.out, 62);
    std::vector<uint16_t> packed(
        static_cast<size_t>(Bf16PairsElements(s.out, s.in)));
    PackBf16Pairs(reinterpret_cast<const uint16_t*>(w.data()), s.out, s.in,
                  packed.data(), &pool);
    const std::vector<float> rows = RunMatMul(
        CpuIsa::kAuto, x, s, w, ElementType::kBF16, &pool,
        MatMulPrecision::kBF16);
    std::vector<float> y(static_cast<size_t>(s.tokens * s.out), -1.0f);
    MatMul(x.data(), s.tokens, s.in, packed.data(), ElementType::kBF16, s.out,
           y.data(), &pool, MatMulPrecision::kBF16, WeightLayout::kBf16Pairs);
    EXPECT_EQ(y, rows) << "T=" << s.tokens;
  }
}

// f32 products on weights packed as bf16 pairs are one fma chain per output
// over the inputs in order (matmul_kernels.h), on every path, for any batch,
// thread count and shape: odd K (half a pair at the end), K past a segment
// (2048 inputs), rows not a multiple of 16, decode and prefill tiles. The
// expected bits are that chain, written out here with std::fma.
TEST(MatMulF32PairsTest, IsOneFmaChainPerOutputOnEveryPathAndShape) {
  ThreadPool pool2(2), pool3(3);
  const Shape shapes[] = {
      {1, 1, 1},     {1, 7, 5},      {2, 33, 17},   {5, 64, 40},
      {8, 257, 45},  {9, 100, 200},  {33, 301, 70}, {1, 2500, 37},
      {40, 4097, 33},
      // Every token count's widest tiles (2 × 10 groups … 7 × 3).
      {2, 64, 170},  {3, 64, 120},   {4, 65, 100},  {6, 64, 70},
      {7, 63, 60},
      // One token tile of 9–16 tokens (x transposed, one group a tile):
      // an odd K over two stretches of x, K = 1, two segments, 16 tokens.
      {12, 513, 33}, {13, 1, 17}, {16, 768, 70}, {10, 4097, 20},
      // The same in two blocks of 9–16 tokens (17 tokens would leave a
      // block of 8: the 8-token tiles instead): two blocks of 9 over K = 1
      // and an odd K over stretches, blocks of 12 and 13 tokens, 32 tokens
      // (a batched decode) in two segments; past 32 the 8-token tiles again.
      {17, 301, 45}, {18, 1, 20}, {18, 301, 70}, {25, 130, 40},
      {32, 2100, 33}, {41, 513, 40}, {95, 257, 50},
      // Prefill over more than one block of groups, in two segments, on
      // two threads.
      {20, 2100, 260},
      // Enough tokens for the blocked form (weights widened once a slice
      // for every token tile): an odd K (half a pair), a partial last
      // tile of groups and of tokens; two segments of slices.
      {97, 301, 70}, {100, 2100, 40}};
  for (const Shape& s : shapes) {
    const std::vector<float> x = RandomFloats(s.tokens * s.in, 71);
    const std::vector<uint8_t> w =
        RandomWeights(ElementType::kBF16, s.in * s.out, 72);
    const uint16_t* wb = reinterpret_cast<const uint16_t*>(w.data());
    std::vector<float> expected(static_cast<size_t>(s.tokens * s.out));
    for (int64_t t = 0; t < s.tokens; ++t) {
      for (int64_t o = 0; o < s.out; ++o) {
        float acc = 0.0f;
        for (int64_t i = 0; i < s.in; ++i) {
          acc = std::fma(x[t * s.in + i], Bf16ToF32(wb[o * s.in + i]), acc);
        }
        expected[t * s.out + o] = acc;
      }
    }
    std::vector<uint16_t> packed(
        static_cast<size_t>(Bf16PairsElements(s.out, s.in)));
    PackBf16Pairs(wb, s.out, s.in, packed.data(), nullptr);
    for (CpuIsa isa : SupportedIsas()) {
      for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &pool2,
                               &pool3}) {
        std::vector<float> y(expected.size(), -1.0f);
        MatMulWithIsa(isa, x.data(), s.tokens, s.in, packed.data(),
                      ElementType::kBF16, s.out, y.data(), pool,
                      MatMulPrecision::kF32, WeightLayout::kBf16Pairs);
        ASSERT_EQ(0, std::memcmp(y.data(), expected.data(),
                                 y.size() * sizeof(float)))
            << Describe(isa, ElementType::kBF16, s,
                        pool == nullptr ? 1 : pool->num_threads());
      }
    }
  }
}

TEST(MatMulBf16Test, OtherWeightTypesKeepF32Products) {
  ThreadPool pool(2);
  const Shape s{9, 130, 45};
  const std::vector<float> x = RandomFloats(s.tokens * s.in, 51);
  for (ElementType type : {ElementType::kF32, ElementType::kF16}) {
    const std::vector<uint8_t> w = RandomWeights(type, s.in * s.out, 52);
    EXPECT_EQ(RunMatMul(CpuIsa::kAuto, x, s, w, type, &pool),
              RunMatMul(CpuIsa::kAuto, x, s, w, type, &pool,
                        MatMulPrecision::kBF16))
        << ElementTypeName(type);
  }
}

}  // namespace
}  // namespace tributary

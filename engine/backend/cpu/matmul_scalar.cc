// The portable path: the canonical 16-lane order (matmul_kernels.h) spelled
// out with std::fma, so that it gives the vector paths' bits exactly; and the
// bf16 products' pair chains, the naive twin of VDPBF16PS on packed pairs.
#include <cfloat>
#include <cmath>

#include "engine/backend/cpu/matmul_kernels.h"

namespace tributary {
namespace matmul_internal {
namespace {

constexpr int kLanes = 16;
constexpr int kMr = 4;
constexpr int kNr = 4;

float LaneTree(const float s[kLanes]) {
  float v8[8], v4[4], v2[2];
  for (int j = 0; j < 8; ++j) v8[j] = s[j] + s[j + 8];
  for (int j = 0; j < 4; ++j) v4[j] = v8[j] + v8[j + 4];
  for (int j = 0; j < 2; ++j) v2[j] = v4[j] + v4[j + 2];
  return v2[0] + v2[1];
}

void TileScalar(int m, const float* x, int64_t ldx, const void* const* rows,
                ElementType type, int64_t k, float* y, int64_t ldy, int n_store,
                const char* /*prefetch*/, const float* lanes_in,
                float* lanes_out) {
  float acc[kMr][kNr][kLanes] = {};
  if (lanes_in != nullptr) {
    for (int t = 0; t < m; ++t) {
      for (int r = 0; r < kNr; ++r) {
        for (int j = 0; j < kLanes; ++j) {
          acc[t][r][j] = lanes_in[(t * kNr + r) * kLanes + j];
        }
      }
    }
  }
  for (int64_t i0 = 0; i0 < k; i0 += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const int64_t i = i0 + j;
      for (int r = 0; r < kNr; ++r) {
        const float w =
            i < k ? LoadAsF32(rows[r], type, static_cast<size_t>(i)) : 0.0f;
        for (int t = 0; t < m; ++t) {
          const float xv = i < k ? x[t * ldx + i] : 0.0f;
          acc[t][r][j] = std::fma(xv, w, acc[t][r][j]);
        }
      }
    }
  }
  if (lanes_out != nullptr) {  // a segment of the inputs: carry the lanes
    for (int t = 0; t < m; ++t) {
      for (int r = 0; r < kNr; ++r) {
        for (int j = 0; j < kLanes; ++j) {
          lanes_out[(t * kNr + r) * kLanes + j] = acc[t][r][j];
        }
      }
    }
    return;
  }
  for (int t = 0; t < m; ++t) {
    for (int r = 0; r < n_store; ++r) y[t * ldy + r] = LaneTree(acc[t][r]);
  }
}

// A subnormal input read as a zero of its sign (VDPBF16PS's DAZ, which
// ignores MXCSR).
float FlushSubnormal(float f) {
  return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f;
}

// acc + x·w rounded once to f32, then VDPBF16PS's FTZ: a result whose
// rounding *with an unbounded exponent* is below 2^-126 becomes a zero of its
// sign. std::fma rounds onto the subnormal grid instead, which differs just
// below 2^-126 (an exact sum of 2^-126 − 2^-150 rounds up to 2^-126 there,
// while the instruction rounds it to 2^-126 − 2^-150 and flushes it). So a
// result at or below 2^-126 is recomputed 2^64 times larger, where it rounds
// as a normal number. That is exact: such a sum's terms are all below
// ~2^-100 (a nonzero sum of an f32 and a product of two bf16 is a multiple
// of the smaller term's last place), so nothing overflows.
float Bf16Fma(float x, float w, float acc) {
  const float r = std::fma(x, w, acc);
  if (r == 0.0f || !(std::fabs(r) <= FLT_MIN)) return r;
  constexpr float kUp = 0x1p64f;
  const bool scale_x = std::fabs(x) <= std::fabs(w);
  const float scaled = std::fma(scale_x ? x * kUp : x, scale_x ? w : w * kUp,
                                acc * kUp);
  return std::fabs(scaled) < 0x1p-62f ? std::copysign(0.0f, scaled)
                                      : scaled * 0x1p-64f;
}

void Bf16DotTileScalar(int m, const uint16_t* x, int64_t ldx,
                       const uint16_t* const* group, int64_t num_pairs,
                       bool accumulate, float* y, int64_t ldy, int rows_store,
                       const char* /*prefetch*/) {
  const auto load = [](const uint16_t* v, int64_t i) {
    return FlushSubnormal(Bf16ToF32(v[i]));
  };
  for (int t = 0; t < m; ++t) {
    for (int r = 0; r < rows_store; ++r) {
      // Row r is lane j of group n: its pair p is at 32p + 2j.
      const uint16_t* w = group[r / kLanes] + 2 * (r % kLanes);
      const uint16_t* xt = x + t * ldx;
      float acc = accumulate ? y[t * ldy + r] : 0.0f;
      for (int64_t p = 0; p < num_pairs; ++p) {
        // The odd element of the pair first, as the instruction adds it.
        acc = Bf16Fma(load(xt, 2 * p + 1), load(w, 32 * p + 1), acc);
        acc = Bf16Fma(load(xt, 2 * p), load(w, 32 * p), acc);
      }
      y[t * ldy + r] = acc;
    }
  }
}

// The naive twin of the f32 products on bf16 pairs: one std::fma chain per
// output over the inputs in order.
void F32PairTileScalar(int m, const float* x, int64_t ldx,
                       const uint16_t* const* group, int64_t num_inputs,
                       bool accumulate, float* y, int64_t ldy, int rows_store,
                       const char* /*prefetch*/) {
  for (int t = 0; t < m; ++t) {
    for (int r = 0; r < rows_store; ++r) {
      // Row r is lane j of group n: its input i is at 32 (i / 2) + 2j +
      // i mod 2.
      const uint16_t* w = group[r / kLanes] + 2 * (r % kLanes);
      float acc = accumulate ? y[t * ldy + r] : 0.0f;
      for (int64_t i = 0; i < num_inputs; ++i) {
        acc = std::fma(x[t * ldx + i], Bf16ToF32(w[32 * (i / 2) + i % 2]),
                       acc);
      }
      y[t * ldy + r] = acc;
    }
  }
}

void RoundScalar(const float* src, int64_t n, uint16_t* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = F32ToBf16(src[i]);
}

void WidenScalar(const void* src, ElementType type, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = LoadAsF32(src, type, static_cast<size_t>(i));
}

}  // namespace

const MatMulKernels& ScalarKernels() {
  static const MatMulKernels kernels{
      kMr, {0, kNr, kNr, kNr, kNr, 0, 0, 0, 0}, &TileScalar, &WidenScalar};
  return kernels;
}

const F32PairKernels& ScalarF32PairKernels() {
  static const F32PairKernels kernels{
      {kMr, {0, kNr, kNr, kNr, kNr, 0, 0, 0, 0}, &F32PairTileScalar},
      nullptr,
      nullptr,
      nullptr,
      nullptr};
  return kernels;
}

const Bf16DotKernels& ScalarBf16DotKernels() {
  static const Bf16DotKernels kernels{
      {kMr, {0, kNr, kNr, kNr, kNr, 0, 0, 0, 0}, &Bf16DotTileScalar},
      &RoundScalar};
  static_assert(kMr <= kMaxTileTokensBf16 && kNr <= kMaxTileGroups);
  return kernels;
}

}  // namespace matmul_internal
}  // namespace tributary

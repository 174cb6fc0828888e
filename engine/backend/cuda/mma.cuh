// One warp-wide tensor-core product, mma.sync.m16n8k16 with bf16 inputs and
// f32 accumulation, and the bf16 packing its fragments use. On the device
// it is the PTX instruction; on the CPU emulation, a warp gather followed by
// the same product in f32, each lane computing the elements it holds.
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating
// point type"), with g = lane / 4 and t = lane % 4, each 32-bit register
// holding two bf16, the lower column (or row, for B) in the low half:
//   A [16 × 16], row-major: a[0] = (g, 2t…2t+1), a[1] = (g + 8, 2t…2t+1),
//                           a[2] = (g, 2t+8…2t+9), a[3] = (g + 8, 2t+8…2t+9)
//   B [16 × 8] (k × n):     b[0] = (2t…2t+1, g), b[1] = (2t+8…2t+9, g)
//   C, D [16 × 8], f32:     c[0], c[1] = (g, 2t), (g, 2t+1);
//                           c[2], c[3] = (g + 8, 2t), (g + 8, 2t+1)
// Included by the .cu files only, after device_common.cuh.
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_MMA_CUH_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_MMA_CUH_

#include <cmath>
#include <cstdint>

#include "engine/backend/cuda/device_common.cuh"

namespace tributary {
namespace cuda {

// Two floats as bf16 (round to nearest even), `low` in the low half.
__device__ __forceinline__ uint32_t PackBf16x2(float low, float high) {
#if defined(TRIBUTARY_CUDA_EMULATION)
  return uint32_t{__float2bfloat16_rn(low).bits} |
         (uint32_t{__float2bfloat16_rn(high).bits} << 16);
#else
  return uint32_t{__bfloat16_as_ushort(__float2bfloat16_rn(low))} |
         (uint32_t{__bfloat16_as_ushort(__float2bfloat16_rn(high))} << 16);
#endif
}

// Two bf16 bit patterns (a row's neighbours, say) into one register.
__device__ __forceinline__ uint32_t PackBits(uint16_t low, uint16_t high) {
  return uint32_t{low} | (uint32_t{high} << 16);
}

// d = a · b + c over one 16 × 8 × 16 tile, by the whole warp (every lane
// must call it, with the fragments above).
__device__ __forceinline__ void MmaBf16(float (&d)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2],
                                        const float (&c)[4]) {
#if defined(TRIBUTARY_CUDA_EMULATION)
  struct Fragments {
    uint32_t a[4];
    uint32_t b[2];
    float c[4];
  };
  const Fragments mine{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}, {c[0], c[1], c[2], c[3]}};
  const Fragments* all = static_cast<const Fragments*>(
      ::tributary::cuda_emulation::WarpAllGather(&mine, sizeof mine));
  auto half = [](uint32_t reg, int which) {
    return ::tributary::Bf16ToF32(static_cast<uint16_t>(reg >> (16 * which)));
  };
  // Element (r, k) of A and (k, n) of B, from the lane and register that
  // hold it.
  auto a_at = [&](int r, int k) {
    const int lane = (r % 8) * 4 + (k % 8) / 2;
    return half(all[lane].a[(r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2);
  };
  auto b_at = [&](int k, int n) {
    const int lane = n * 4 + (k % 8) / 2;
    return half(all[lane].b[k >= 8 ? 1 : 0], k % 2);
  };
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  const int g = lane / 4, t = lane % 4;
  // The lane's two rows of A (g, g + 8) and two columns of B (2t, 2t + 1),
  // widened once each rather than once per output.
  float a_rows[2][16], b_cols[2][16];
  for (int k = 0; k < 16; ++k) {
    a_rows[0][k] = a_at(g, k);
    a_rows[1][k] = a_at(g + 8, k);
    b_cols[0][k] = b_at(k, 2 * t);
    b_cols[1][k] = b_at(k, 2 * t + 1);
  }
  for (int i = 0; i < 4; ++i) {
    const float* a_row = a_rows[i >= 2 ? 1 : 0];
    const float* b_col = b_cols[i & 1];
    float sum = c[i];
    for (int k = 0; k < 16; ++k) sum += a_row[k] * b_col[k];
    d[i] = sum;
  }
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
        "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
#endif
}

// One key tile's step of an online softmax over scores held as C fragments
// (rows g and g + 8 of the lane, columns 2t and 2t + 1 of each 8-key
// n-tile), already scaled, with masked keys at −∞: updates each row's
// running max and this lane's share of its denominator, returns in
// `correction` the factor the row's output accumulators must take
// (e^(old max − new max)), and packs the probabilities as the A fragments of
// P for the P V product (n-tiles 2kk and 2kk + 1 are k-step kk's two column
// halves). A row with no visible key yet keeps max −∞; its exponents then
// use 0, so that −∞ − −∞ never makes a NaN. The flash and the tensor-core
// split attention kernels share it.
template <int kNTiles>
__device__ __forceinline__ void OnlineSoftmaxTile(const float (&s)[kNTiles][4],
                                                  float (&running_max)[2],
                                                  float (&partial_sum)[2],
                                                  float (&correction)[2],
                                                  uint32_t (&pa)[kNTiles / 2][4]) {
  static_assert(kNTiles % 2 == 0, "P's k-steps are pairs of n-tiles");
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) tile_max[i >> 1] = fmaxf(tile_max[i >> 1], s[n][i]);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    // The row's 4 lanes (t) hold its columns.
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
    tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    const float new_max = fmaxf(running_max[r], tile_max[r]);
    const float reference = new_max == -INFINITY ? 0.0f : new_max;
    correction[r] = expf(running_max[r] - reference);  // 0 at a row's first keys
    running_max[r] = new_max;
    partial_sum[r] *= correction[r];
  }
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) {
    float p[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = i >> 1;
      const float reference = running_max[r] == -INFINITY ? 0.0f : running_max[r];
      p[i] = expf(s[n][i] - reference);
      partial_sum[r] += p[i];
    }
    const int kk = n / 2, upper = n % 2;
    pa[kk][2 * upper] = PackBf16x2(p[0], p[1]);
    pa[kk][2 * upper + 1] = PackBf16x2(p[2], p[3]);
  }
}

}  // namespace cuda
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_MMA_CUH_

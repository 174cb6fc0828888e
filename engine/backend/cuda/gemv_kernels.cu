// Matrix products of few tokens (a decode step): y [T, out] = x [T, in] · wᵀ
// with T ≤ kGemvMaxTokens, bf16 weights and inputs, f32 accumulation. Such a
// product reads every weight once and does T multiply-adds with it, so its
// time is the weights' bytes over the memory bandwidth: the kernel's one job
// is to stream them at full width. A warp takes kGemvRowsPerWarp rows of w;
// each lane loads 8 consecutive weights (16 bytes) of each row per step, so
// a warp reads 512 contiguous bytes of a row at a time, and multiplies them
// with the same 8 inputs of every token (x is small and stays in cache). The
// partial sums are reduced across the warp once, at the end.
//
// A token's result does not depend on T (the same lanes sum the same
// products in the same order), so up to kGemvMaxTokens a decode step's
// logits do not depend on its batch size (beyond, cuBLAS takes the product,
// with its own summation order).
#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/cuda/device_common.cuh"

namespace tributary {
namespace cuda {
namespace {

constexpr int kGemvWarps = 8;
constexpr int kGemvRowsPerWarp = 2;
constexpr int kGemvVector = 8;  // bf16 per 16-byte load (LoadBf16x8)

template <int kTokens>
__global__ void GemvKernel(const __nv_bfloat16* x, int64_t in,
                           const __nv_bfloat16* w, int64_t out, Typed y) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int64_t row0 =
      (blockIdx.x * int64_t{kGemvWarps} + warp) * kGemvRowsPerWarp;
  if (row0 >= out) return;  // the whole warp
  float acc[kGemvRowsPerWarp][kTokens];
#pragma unroll
  for (int r = 0; r < kGemvRowsPerWarp; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) acc[r][t] = 0.0f;
  }
  for (int64_t k = int64_t{lane} * kGemvVector; k < in;
       k += int64_t{kWarpSize} * kGemvVector) {
    float xv[kTokens][kGemvVector];
#pragma unroll
    for (int t = 0; t < kTokens; ++t) LoadBf16x8(x + t * in + k, xv[t]);
#pragma unroll
    for (int r = 0; r < kGemvRowsPerWarp; ++r) {
      if (row0 + r >= out) break;  // the same for the whole warp
      float wv[kGemvVector];
      LoadBf16x8(w + (row0 + r) * in + k, wv);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
#pragma unroll
        for (int i = 0; i < kGemvVector; ++i) acc[r][t] += wv[i] * xv[t][i];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kGemvRowsPerWarp; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      const float sum = WarpSum(acc[r][t]);
      if (lane == 0 && row0 + r < out) {
        StoreF32(y.data, y.type, t * out + row0 + r, sum);
      }
    }
  }
}

static_assert(kGemvMaxTokens == 8, "LaunchGemv instantiates 1 … 8 tokens");

template <int kTokens>
void LaunchGemvFor(const void* x, int64_t in, const void* w, int64_t out,
                   Typed y, cudaStream_t stream) {
  const int64_t rows_per_block = int64_t{kGemvWarps} * kGemvRowsPerWarp;
  const unsigned blocks = static_cast<unsigned>((out + rows_per_block - 1) / rows_per_block);
  TRIBUTARY_LAUNCH(GemvKernel<kTokens>, blocks, kGemvWarps * kWarpSize, stream)(
      static_cast<const __nv_bfloat16*>(x), in,
      static_cast<const __nv_bfloat16*>(w), out, y);
}

}  // namespace

void LaunchGemv(const void* x, int64_t tokens, int64_t in, const void* w,
                int64_t out, Typed y, cudaStream_t stream) {
  if (tokens <= 0 || out <= 0) return;
  switch (tokens) {
    case 1: return LaunchGemvFor<1>(x, in, w, out, y, stream);
    case 2: return LaunchGemvFor<2>(x, in, w, out, y, stream);
    case 3: return LaunchGemvFor<3>(x, in, w, out, y, stream);
    case 4: return LaunchGemvFor<4>(x, in, w, out, y, stream);
    case 5: return LaunchGemvFor<5>(x, in, w, out, y, stream);
    case 6: return LaunchGemvFor<6>(x, in, w, out, y, stream);
    case 7: return LaunchGemvFor<7>(x, in, w, out, y, stream);
    case 8: return LaunchGemvFor<8>(x, in, w, out, y, stream);
    default: return;  // the caller keeps to kGemvMaxTokens
  }
}

}  // namespace cuda
}  // namespace tributary

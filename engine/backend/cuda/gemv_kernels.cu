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

// One product of a group, as a kernel parameter: 8-byte fields only, so the
// launch recorder can key it by its bytes.
struct GemvTarget {
  const void* w;        // [out, in] bf16
  void* y;              // [tokens, out]
  int64_t out;
  int64_t y_type;       // ElementType
  int64_t first_block;  // its first block in the grid
};
struct GemvGroup {
  GemvTarget targets[kGemvMaxOutputs];
  int64_t count;
};

// The group's target of block blockIdx.x (its blocks follow the earlier
// targets' blocks).
__device__ __forceinline__ const GemvTarget& TargetOfBlock(const GemvGroup& group) {
  int i = 0;
  while (i + 1 < group.count && blockIdx.x >= group.targets[i + 1].first_block) ++i;
  return group.targets[i];
}

// The warp's sums of kGemvRowsPerWarp rows of weights against each token of
// x, reduced across the warp (every lane holds them).
// Lane l takes weights l · 8 … l · 8 + 7 of every 256, whichever the rows,
// so a row's sum has the same bits in either kernel below.
template <int kTokens>
__device__ __forceinline__ void WarpRowSums(
    const __nv_bfloat16* x, int64_t in,
    const __nv_bfloat16* const (&w)[kGemvRowsPerWarp],
    float (&sums)[kGemvRowsPerWarp][kTokens]) {
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int r = 0; r < kGemvRowsPerWarp; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) sums[r][t] = 0.0f;
  }
  for (int64_t k = int64_t{lane} * kGemvVector; k < in;
       k += int64_t{kWarpSize} * kGemvVector) {
    float xv[kTokens][kGemvVector];
#pragma unroll
    for (int t = 0; t < kTokens; ++t) LoadBf16x8(x + t * in + k, xv[t]);
#pragma unroll
    for (int r = 0; r < kGemvRowsPerWarp; ++r) {
      float wv[kGemvVector];
      LoadBf16x8(w[r] + k, wv);
#pragma unroll
      for (int t = 0; t < kTokens; ++t) {
#pragma unroll
        for (int i = 0; i < kGemvVector; ++i) sums[r][t] += wv[i] * xv[t][i];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kGemvRowsPerWarp; ++r) {
#pragma unroll
    for (int t = 0; t < kTokens; ++t) sums[r][t] = WarpSum(sums[r][t]);
  }
}

template <int kTokens>
__global__ void GemvKernel(const __nv_bfloat16* x, int64_t in, GemvGroup group) {
  const GemvTarget& target = TargetOfBlock(group);
  const auto* w = static_cast<const __nv_bfloat16*>(target.w);
  const int64_t out = target.out;
  const Typed y{target.y, static_cast<ElementType>(target.y_type)};
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int64_t row0 =
      ((blockIdx.x - target.first_block) * int64_t{kGemvWarps} + warp) *
      kGemvRowsPerWarp;
  if (row0 >= out) return;  // the whole warp
  const int rows = out - row0 < kGemvRowsPerWarp ? static_cast<int>(out - row0)
                                                 : kGemvRowsPerWarp;
  // Past the last row, the warp sums the last row again (unstored): a loop
  // without a bound on the rows takes fewer registers (ptxas sm_90: 80
  // instead of 113 at 8 tokens, 66 instead of 93 at 5, so 3 blocks a
  // multiprocessor instead of 2).
  const __nv_bfloat16* row_weights[kGemvRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kGemvRowsPerWarp; ++r) {
    row_weights[r] = w + (r < rows ? row0 + r : out - 1) * in;
  }
  float sums[kGemvRowsPerWarp][kTokens];
  WarpRowSums<kTokens>(x, in, row_weights, sums);
  if (lane != 0) return;
#pragma unroll
  for (int r = 0; r < kGemvRowsPerWarp; ++r) {
    if (r >= rows) break;
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      StoreF32(y.data, y.type, t * out + row0 + r, sums[r][t]);
    }
  }
}

// out [T, rows] = silu(x · w_gateᵀ) ⊙ (x · w_upᵀ): a warp per output row,
// its two rows of weights the gate's and the up's row. Each product is
// rounded to out's type before the SwiGLU, as GemvKernel's outputs would be
// stored, so the result has SwiGluKernel's bits over GemvKernel's.
template <int kTokens>
__global__ void GemvSwiGluKernel(const __nv_bfloat16* x, int64_t in,
                                 const __nv_bfloat16* w_gate,
                                 const __nv_bfloat16* w_up, int64_t rows_out,
                                 Typed out) {
  static_assert(kGemvRowsPerWarp == 2, "a warp's rows are the gate's and the up's");
  const int lane = threadIdx.x % kWarpSize;
  const int64_t row = blockIdx.x * int64_t{kGemvWarps} + threadIdx.x / kWarpSize;
  if (row >= rows_out) return;  // the whole warp
  const __nv_bfloat16* const row_weights[kGemvRowsPerWarp] = {w_gate + row * in,
                                                              w_up + row * in};
  float sums[kGemvRowsPerWarp][kTokens];
  WarpRowSums<kTokens>(x, in, row_weights, sums);
  if (lane != 0) return;
#pragma unroll
  for (int t = 0; t < kTokens; ++t) {
    const float gate = RoundTo(out.type, sums[0][t]);
    const float up = RoundTo(out.type, sums[1][t]);
    StoreF32(out.data, out.type, t * rows_out + row, SiluF32(gate) * up);
  }
}

static_assert(kGemvMaxTokens == 8, "LaunchGemv instantiates 1 … 8 tokens");

template <int kTokens>
void LaunchGemvSwiGluFor(const void* x, int64_t in, const void* w_gate,
                         const void* w_up, int64_t rows_out, Typed out,
                         cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((rows_out + kGemvWarps - 1) / kGemvWarps);
  TRIBUTARY_LAUNCH(GemvSwiGluKernel<kTokens>, blocks, kGemvWarps * kWarpSize, stream)(
      static_cast<const __nv_bfloat16*>(x), in,
      static_cast<const __nv_bfloat16*>(w_gate),
      static_cast<const __nv_bfloat16*>(w_up), rows_out, out);
}

template <int kTokens>
void LaunchGemvFor(const void* x, int64_t in, const GemvGroup& group,
                   unsigned blocks, cudaStream_t stream) {
  TRIBUTARY_LAUNCH(GemvKernel<kTokens>, blocks, kGemvWarps * kWarpSize, stream)(
      static_cast<const __nv_bfloat16*>(x), in, group);
}

}  // namespace

void LaunchGemv(const void* x, int64_t tokens, int64_t in,
                const GemvOutput* outputs, int count, cudaStream_t stream) {
  if (tokens <= 0 || count <= 0 || count > kGemvMaxOutputs) return;
  const int64_t rows_per_block = int64_t{kGemvWarps} * kGemvRowsPerWarp;
  GemvGroup group{};
  int64_t blocks = 0;
  for (int i = 0; i < count; ++i) {
    GemvTarget& t = group.targets[i];
    t.w = outputs[i].w;
    t.y = outputs[i].y.data;
    t.out = outputs[i].out;
    t.y_type = static_cast<int64_t>(outputs[i].y.type);
    t.first_block = blocks;
    blocks += (outputs[i].out + rows_per_block - 1) / rows_per_block;
  }
  group.count = count;
  if (blocks <= 0) return;
  const unsigned grid = static_cast<unsigned>(blocks);
  switch (tokens) {
    case 1: return LaunchGemvFor<1>(x, in, group, grid, stream);
    case 2: return LaunchGemvFor<2>(x, in, group, grid, stream);
    case 3: return LaunchGemvFor<3>(x, in, group, grid, stream);
    case 4: return LaunchGemvFor<4>(x, in, group, grid, stream);
    case 5: return LaunchGemvFor<5>(x, in, group, grid, stream);
    case 6: return LaunchGemvFor<6>(x, in, group, grid, stream);
    case 7: return LaunchGemvFor<7>(x, in, group, grid, stream);
    case 8: return LaunchGemvFor<8>(x, in, group, grid, stream);
    default: return;  // the caller keeps to kGemvMaxTokens
  }
}

void LaunchGemvSwiGlu(const void* x, int64_t tokens, int64_t in,
                      const void* w_gate, const void* w_up, int64_t rows_out,
                      Typed out, cudaStream_t stream) {
  if (tokens <= 0 || rows_out <= 0) return;
  switch (tokens) {
    case 1: return LaunchGemvSwiGluFor<1>(x, in, w_gate, w_up, rows_out, out, stream);
    case 2: return LaunchGemvSwiGluFor<2>(x, in, w_gate, w_up, rows_out, out, stream);
    case 3: return LaunchGemvSwiGluFor<3>(x, in, w_gate, w_up, rows_out, out, stream);
    case 4: return LaunchGemvSwiGluFor<4>(x, in, w_gate, w_up, rows_out, out, stream);
    case 5: return LaunchGemvSwiGluFor<5>(x, in, w_gate, w_up, rows_out, out, stream);
    case 6: return LaunchGemvSwiGluFor<6>(x, in, w_gate, w_up, rows_out, out, stream);
    case 7: return LaunchGemvSwiGluFor<7>(x, in, w_gate, w_up, rows_out, out, stream);
    case 8: return LaunchGemvSwiGluFor<8>(x, in, w_gate, w_up, rows_out, out, stream);
    default: return;  // the caller keeps to kGemvMaxTokens
  }
}

}  // namespace cuda
}  // namespace tributary

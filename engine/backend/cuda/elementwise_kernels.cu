// Row-wise and element-wise kernels: straightforward and correct first (one
// block per row for the reductions, a grid-stride loop for element-wise
// work), with fused versions beside them (ResidualAddRmsNormKernel).
// Reductions sum in f32 in a fixed order (lane order within a warp, then warp
// order), so a row's result does not depend on the rest of the batch.
#include <climits>
#include <cmath>

#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/cuda/device_common.cuh"
#include "engine/backend/random_fill.h"

namespace tributary {
namespace cuda {
namespace {

#define GRID_STRIDE_LOOP(i, n)                                              \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{blockDim.x} * gridDim.x)

__global__ void ConvertKernel(ConstTyped src, Typed dst, int64_t n) {
  BeginAfterPriorGrids();
  GRID_STRIDE_LOOP(i, n) {
    StoreF32(dst.data, dst.type, i, LoadF32(src.data, src.type, i));
  }
}

__global__ void FillRandomKernel(Typed dst, int64_t n, uint64_t seed,
                                 float low, float high, ElementType value_type) {
  BeginAfterPriorGrids();
  GRID_STRIDE_LOOP(i, n) {
    StoreF32(dst.data, dst.type, i,
             RoundTo(value_type,
                     RandomUniform(seed, static_cast<uint64_t>(i), low, high)));
  }
}

__global__ void EmbeddingGatherKernel(const int32_t* ids, ConstTyped table,
                                      int64_t hidden, Typed out) {
  BeginAfterPriorGrids();
  const int64_t t = blockIdx.x;
  const int64_t row = static_cast<int64_t>(ids[t]) * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    StoreF32(out.data, out.type, t * hidden + i,
             LoadF32(table.data, table.type, row + i));
  }
}


// One block per row. Each thread rereads and writes only the elements it
// read itself, so x and out may alias.
__global__ void RmsNormKernel(ConstTyped x, int64_t dim, ConstTyped w,
                              float eps, Typed out) {
  BeginAfterPriorGrids();
  __shared__ float scratch[kRowThreads / kWarpSize];
  const int64_t base = blockIdx.x * dim;
  const float sum_sq = RowSumOfSquares(x, base, dim, scratch);
  const float inv_rms = RmsFactor(sum_sq, dim, eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = LoadF32(x.data, x.type, base + i);
    StoreF32(out.data, out.type, base + i,
             v * inv_rms * (1.0f + LoadF32(w.data, w.type, i)));
  }
}

__global__ void GatedRmsNormKernel(ConstTyped o, ConstTyped z, int64_t dim,
                                   ConstTyped w, float eps, Typed out) {
  BeginAfterPriorGrids();
  __shared__ float scratch[kRowThreads / kWarpSize];
  const int64_t base = blockIdx.x * dim;
  const float sum_sq = RowSumOfSquares(o, base, dim, scratch);
  const float inv_rms = RmsFactor(sum_sq, dim, eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = LoadF32(o.data, o.type, base + i);
    const float gate = SiluF32(LoadF32(z.data, z.type, base + i));
    StoreF32(out.data, out.type, base + i,
             v * inv_rms * LoadF32(w.data, w.type, i) * gate);
  }
}

// Row blockIdx.x of the residual add, by the whole block: x ← x + u
// (rounded to x's type), the row's statistics into stats (if not null), and
// the sum of squares of the stored row, returned to every thread when
// `want_sum_sq` (a thread's partial sums are over its own elements in
// order, reduced in BlockSum's order: RmsNorm of the stored row computes the
// same). Without either, no reduction runs.
__device__ float ResidualAddRow(Typed x, ConstTyped u, int64_t hidden,
                                float* stats, bool want_sum_sq) {
  __shared__ float sums[3][kRowThreads / kWarpSize];
  __shared__ float max_values[kRowThreads / kWarpSize];
  __shared__ int max_indexes[kRowThreads / kWarpSize];
  __shared__ int any_nonfinite;
  if (threadIdx.x == 0) any_nonfinite = 0;
  __syncthreads();
  const int64_t base = blockIdx.x * hidden;
  float stream_sq = 0.0f, update_sq = 0.0f, sum_sq = 0.0f;
  float max_abs = -1.0f;
  int max_dim = 0;
  bool nonfinite = false;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float xv = LoadF32(x.data, x.type, base + i);
    const float uv = LoadF32(u.data, u.type, base + i);
    const float y = RoundTo(x.type, xv + uv);
    StoreF32(x.data, x.type, base + i, y);
    stream_sq += xv * xv;
    update_sq += uv * uv;
    sum_sq += y * y;
    if (!isfinite(uv) || !isfinite(y)) nonfinite = true;
    MaxIndexMerge(max_abs, max_dim, fabsf(y), static_cast<int>(i));
  }
  if (stats == nullptr && !want_sum_sq) return 0.0f;  // uniform across the block
  if (nonfinite) atomicOr(&any_nonfinite, 1);
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  stream_sq = WarpSum(stream_sq);
  update_sq = WarpSum(update_sq);
  sum_sq = WarpSum(sum_sq);
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const float other_value = __shfl_xor_sync(0xffffffffu, max_abs, offset);
    const int other_index = __shfl_xor_sync(0xffffffffu, max_dim, offset);
    MaxIndexMerge(max_abs, max_dim, other_value, other_index);
  }
  if (lane == 0) {
    sums[0][warp] = stream_sq;
    sums[1][warp] = update_sq;
    sums[2][warp] = sum_sq;
    max_values[warp] = max_abs;
    max_indexes[warp] = max_dim;
  }
  __syncthreads();
  float totals[3] = {0.0f, 0.0f, 0.0f};
  float best = -1.0f;
  int best_dim = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x / kWarpSize); ++w) {
    for (int s = 0; s < 3; ++s) totals[s] += sums[s][w];
    MaxIndexMerge(best, best_dim, max_values[w], max_indexes[w]);
  }
  if (stats != nullptr && threadIdx.x == 0) {
    float* row = stats + blockIdx.x * 6;
    row[0] = sqrtf(totals[0]);
    row[1] = sqrtf(totals[1]);
    row[2] = sqrtf(totals[2]);
    row[3] = fmaxf(best, 0.0f);
    row[4] = static_cast<float>(best_dim);
    row[5] = any_nonfinite != 0 ? 1.0f : 0.0f;
  }
  return totals[2];
}

// One block per token: the add, then the token's statistics over the stored
// (rounded) sum.
__global__ void ResidualAddKernel(Typed x, ConstTyped u, int64_t hidden,
                                  float* stats) {
  BeginAfterPriorGrids();
  ResidualAddRow(x, u, hidden, stats, /*want_sum_sq=*/false);
}

// ResidualAddKernel and RmsNormKernel of the new row in one block, with the
// bits of the two run one after the other (see ResidualAddRow).
__global__ void ResidualAddRmsNormKernel(Typed x, ConstTyped u, int64_t hidden,
                                         float* stats, ConstTyped w, float eps,
                                         Typed normed) {
  BeginAfterPriorGrids();
  const float sum_sq = ResidualAddRow(x, u, hidden, stats, /*want_sum_sq=*/true);
  const float inv_rms = RmsFactor(sum_sq, hidden, eps);
  // Each thread rereads the elements it wrote.
  const int64_t base = blockIdx.x * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = LoadF32(x.data, x.type, base + i);
    StoreF32(normed.data, normed.type, base + i,
             v * inv_rms * (1.0f + LoadF32(w.data, w.type, i)));
  }
}

// One block per row (BlockArgMax); a NaN or infinity anywhere makes the
// row's id -1.
__global__ void ArgMaxRowsKernel(const float* x, int64_t dim, int32_t* ids) {
  BeginAfterPriorGrids();
  __shared__ BlockArgMaxScratch scratch;
  float best;
  int best_index;
  bool nonfinite;
  BlockArgMax(x + blockIdx.x * dim, dim, scratch, &best, &best_index, &nonfinite);
  if (threadIdx.x == 0) {
    ids[blockIdx.x] = nonfinite || best_index == INT_MAX ? -1 : best_index;
  }
}

__global__ void SwiGluKernel(ConstTyped gate, ConstTyped up, int64_t n,
                             Typed out) {
  BeginAfterPriorGrids();
  GRID_STRIDE_LOOP(i, n) {
    const float value =
        SiluF32(LoadF32(gate.data, gate.type, i)) * LoadF32(up.data, up.type, i);
    StoreF32(out.data, out.type, i, value);
  }
}

__global__ void SigmoidGateKernel(Typed o, ConstTyped gate, int64_t n) {
  BeginAfterPriorGrids();
  GRID_STRIDE_LOOP(i, n) {
    StoreF32(o.data, o.type, i,
             LoadF32(o.data, o.type, i) *
                 SigmoidF32(LoadF32(gate.data, gate.type, i)));
  }
}

__global__ void L2NormRowsKernel(Typed x, int64_t dim, float scale) {
  BeginAfterPriorGrids();
  __shared__ float scratch[kRowThreads / kWarpSize];
  const int64_t base = blockIdx.x * dim;
  const float sum_sq =
      RowSumOfSquares(ConstTyped{x.data, x.type}, base, dim, scratch);
  const float factor = L2NormFactor(sum_sq, scale);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    StoreF32(x.data, x.type, base + i,
             LoadF32(x.data, x.type, base + i) * factor);
  }
}

__global__ void GdnGatesKernel(ConstTyped a, ConstTyped b, int64_t n,
                               int64_t num_heads, ConstTyped a_log,
                               ConstTyped dt_bias, Typed g, Typed beta) {
  BeginAfterPriorGrids();
  GRID_STRIDE_LOOP(i, n) {
    const int64_t h = i % num_heads;
    StoreF32(g.data, g.type, i,
             GdnLogDecay(LoadF32(a.data, a.type, i) +
                             LoadF32(dt_bias.data, dt_bias.type, h),
                         LoadF32(a_log.data, a_log.type, h)));
    StoreF32(beta.data, beta.type, i, SigmoidF32(LoadF32(b.data, b.type, i)));
  }
}

__global__ void CopyColumnsKernel(ConstTyped src, int64_t rows,
                                  int64_t src_cols, int64_t col_begin,
                                  Typed dst, int64_t dst_cols) {
  BeginAfterPriorGrids();
  GRID_STRIDE_LOOP(i, rows * dst_cols) {
    const int64_t r = i / dst_cols, c = i % dst_cols;
    StoreF32(dst.data, dst.type, i,
             LoadF32(src.data, src.type, r * src_cols + col_begin + c));
  }
}

__global__ void GatherRowsKernel(ConstTyped src, const int32_t* rows,
                                 int64_t num_rows, int64_t dim, Typed dst) {
  BeginAfterPriorGrids();
  GRID_STRIDE_LOOP(i, num_rows * dim) {
    const int64_t r = i / dim, c = i % dim;
    StoreF32(dst.data, dst.type, i,
             LoadF32(src.data, src.type, rows[r] * dim + c));
  }
}

__global__ void AddScaledVectorKernel(Typed x, int64_t num_rows, int64_t dim,
                                      const float* v, float scale) {
  BeginAfterPriorGrids();
  GRID_STRIDE_LOOP(i, num_rows * dim) {
    StoreF32(x.data, x.type, i,
             LoadF32(x.data, x.type, i) + scale * v[i % dim]);
  }
}

__global__ void ProjectOutKernel(Typed x, int64_t dim, const float* u) {
  BeginAfterPriorGrids();
  __shared__ float scratch[kRowThreads / kWarpSize];
  const int64_t base = blockIdx.x * dim;
  float dot = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    dot += LoadF32(x.data, x.type, base + i) * u[i];
  }
  dot = BlockSum(dot, scratch);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    StoreF32(x.data, x.type, base + i,
             LoadF32(x.data, x.type, base + i) - dot * u[i]);
  }
}

}  // namespace

int KernelPtxVersion() {
#if defined(TRIBUTARY_CUDA_EMULATION)
  return 90;  // the emulation runs grids one after another
#else
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, ConvertKernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return attributes.ptxVersion;
#endif
}

void LaunchConvert(ConstTyped src, Typed dst, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  TRIBUTARY_LAUNCH(ConvertKernel, ElementBlocks(n), kElementThreads, stream)(src, dst, n);
}

void LaunchFillRandom(Typed dst, int64_t n, uint64_t seed, float low,
                      float high, ElementType value_type, cudaStream_t stream) {
  if (n <= 0) return;
  TRIBUTARY_LAUNCH(FillRandomKernel, ElementBlocks(n), kElementThreads, stream)(
      dst, n, seed, low, high, value_type);
}

void LaunchEmbeddingGather(const int32_t* ids, int64_t num_tokens,
                           ConstTyped table, int64_t hidden, Typed out,
                           cudaStream_t stream) {
  if (num_tokens <= 0) return;
  TRIBUTARY_LAUNCH(EmbeddingGatherKernel, static_cast<unsigned>(num_tokens), kRowThreads, stream)(ids, table, hidden, out);
}

void LaunchRmsNorm(ConstTyped x, int64_t num_rows, int64_t dim, ConstTyped w,
                   float eps, Typed out, cudaStream_t stream) {
  if (num_rows <= 0) return;
  TRIBUTARY_LAUNCH(RmsNormKernel, static_cast<unsigned>(num_rows), kRowThreads, stream)(
      x, dim, w, eps, out);
}

void LaunchGatedRmsNorm(ConstTyped o, ConstTyped z, int64_t num_rows,
                        int64_t dim, ConstTyped w, float eps, Typed out,
                        cudaStream_t stream) {
  if (num_rows <= 0) return;
  TRIBUTARY_LAUNCH(GatedRmsNormKernel, static_cast<unsigned>(num_rows), kRowThreads, stream)(o, z, dim, w, eps, out);
}

void LaunchResidualAdd(Typed x, ConstTyped u, int64_t num_tokens,
                       int64_t hidden, float* stats, cudaStream_t stream) {
  if (num_tokens <= 0) return;
  TRIBUTARY_LAUNCH(ResidualAddKernel, static_cast<unsigned>(num_tokens), kRowThreads, stream)(x, u, hidden, stats);
}

void LaunchResidualAddRmsNorm(Typed x, ConstTyped u, int64_t num_tokens,
                              int64_t hidden, float* stats, ConstTyped w,
                              float eps, Typed normed, cudaStream_t stream) {
  if (num_tokens <= 0) return;
  TRIBUTARY_LAUNCH(ResidualAddRmsNormKernel, static_cast<unsigned>(num_tokens),
                   kRowThreads, stream)(x, u, hidden, stats, w, eps, normed);
}

void LaunchArgMaxRows(const float* x, int64_t num_rows, int64_t dim,
                      int32_t* ids, cudaStream_t stream) {
  if (num_rows <= 0) return;
  TRIBUTARY_LAUNCH(ArgMaxRowsKernel, static_cast<unsigned>(num_rows),
                   kRowThreads, stream)(x, dim, ids);
}

void LaunchSwiGlu(ConstTyped gate, ConstTyped up, int64_t n, Typed out,
                  cudaStream_t stream) {
  if (n <= 0) return;
  TRIBUTARY_LAUNCH(SwiGluKernel, ElementBlocks(n), kElementThreads, stream)(gate, up, n,
                                                                  out);
}

void LaunchSigmoidGate(Typed o, ConstTyped gate, int64_t n,
                       cudaStream_t stream) {
  if (n <= 0) return;
  TRIBUTARY_LAUNCH(SigmoidGateKernel, ElementBlocks(n), kElementThreads, stream)(o, gate,
                                                                       n);
}

void LaunchL2NormRows(Typed x, int64_t num_rows, int64_t dim, float scale,
                      cudaStream_t stream) {
  if (num_rows <= 0) return;
  TRIBUTARY_LAUNCH(L2NormRowsKernel, static_cast<unsigned>(num_rows), kRowThreads, stream)(x, dim, scale);
}

void LaunchGdnGates(ConstTyped a, ConstTyped b, int64_t num_tokens,
                    int64_t num_heads, ConstTyped a_log, ConstTyped dt_bias,
                    Typed g, Typed beta, cudaStream_t stream) {
  const int64_t n = num_tokens * num_heads;
  if (n <= 0) return;
  TRIBUTARY_LAUNCH(GdnGatesKernel, ElementBlocks(n), kElementThreads, stream)(
      a, b, n, num_heads, a_log, dt_bias, g, beta);
}

void LaunchCopyColumns(ConstTyped src, int64_t rows, int64_t src_cols,
                       int64_t col_begin, Typed dst, int64_t dst_cols,
                       cudaStream_t stream) {
  const int64_t n = rows * dst_cols;
  if (n <= 0) return;
  TRIBUTARY_LAUNCH(CopyColumnsKernel, ElementBlocks(n), kElementThreads, stream)(
      src, rows, src_cols, col_begin, dst, dst_cols);
}

void LaunchGatherRows(ConstTyped src, const int32_t* rows, int64_t num_rows,
                      int64_t dim, Typed dst, cudaStream_t stream) {
  const int64_t n = num_rows * dim;
  if (n <= 0) return;
  TRIBUTARY_LAUNCH(GatherRowsKernel, ElementBlocks(n), kElementThreads, stream)(
      src, rows, num_rows, dim, dst);
}

void LaunchAddScaledVector(Typed x, int64_t num_rows, int64_t dim,
                           const float* v, float scale, cudaStream_t stream) {
  const int64_t n = num_rows * dim;
  if (n <= 0) return;
  TRIBUTARY_LAUNCH(AddScaledVectorKernel, ElementBlocks(n), kElementThreads, stream)(
      x, num_rows, dim, v, scale);
}

void LaunchProjectOut(Typed x, int64_t num_rows, int64_t dim, const float* u,
                      cudaStream_t stream) {
  if (num_rows <= 0) return;
  TRIBUTARY_LAUNCH(ProjectOutKernel, static_cast<unsigned>(num_rows), kRowThreads, stream)(x, dim, u);
}

}  // namespace cuda
}  // namespace tributary

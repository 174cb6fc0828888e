// The kernels of the gated attention layers that use the batch layout: RoPE
// at each token's position, the KV write into paged blocks, and paged
// attention. Attention here is the straightforward form (one warp per query
// head and token, an online softmax over the keys one at a time, no score
// matrix); the flash-attention and flash-decoding kernels are the next
// issue's, tested against this one.
#include <cmath>

#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/cuda/device_common.cuh"

namespace tributary {
namespace cuda {
namespace {

// Head dims up to 32 · kMaxHeadDimPerLane.
constexpr int kMaxHeadDimPerLane = 16;
constexpr int kAttentionWarpsPerBlock = 4;

// The pool row of position p of a sequence (row = block · block_size +
// p mod block_size).
__device__ __forceinline__ int64_t CacheRow(const DeviceLayout& layout,
                                            const DeviceSequence& seq,
                                            int64_t p, int64_t block_size) {
  const int32_t block = layout.block_tables[seq.block_table_offset + p / block_size];
  return static_cast<int64_t>(block) * block_size + p % block_size;
}

// One thread per (token, head, rotated pair).
__global__ void RopeKernel(Typed x, int64_t num_tokens, int64_t num_heads,
                           int64_t head_dim, int64_t rotary_dim, float theta,
                           DeviceLayout layout) {
  const int64_t half = rotary_dim / 2;
  const int64_t n = num_tokens * num_heads * half;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n;
       idx += int64_t{blockDim.x} * gridDim.x) {
    const int64_t i = idx % half;
    const int64_t th = idx / half;  // token · heads + head
    const int64_t t = th / num_heads;
    // As transformers: inv_freq in f32, angle = f32(position) · inv_freq.
    const float inv_freq =
        1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
    const float angle = static_cast<float>(layout.token_position[t]) * inv_freq;
    const float c = cosf(angle), s = sinf(angle);
    const int64_t base = th * head_dim;
    const float a = LoadF32(x.data, x.type, base + i);
    const float b = LoadF32(x.data, x.type, base + i + half);
    StoreF32(x.data, x.type, base + i, a * c - b * s);
    StoreF32(x.data, x.type, base + i + half, b * c + a * s);
  }
}

__global__ void WriteKvKernel(ConstTyped k, ConstTyped v, int64_t num_tokens,
                              int64_t row, Typed k_pool, Typed v_pool,
                              int64_t block_size, DeviceLayout layout) {
  const int64_t n = num_tokens * row;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n;
       idx += int64_t{blockDim.x} * gridDim.x) {
    const int64_t t = idx / row, e = idx % row;
    const DeviceSequence& seq = layout.sequences[layout.token_sequence[t]];
    const int64_t slot =
        CacheRow(layout, seq, layout.token_position[t], block_size);
    StoreF32(k_pool.data, k_pool.type, slot * row + e,
             LoadF32(k.data, k.type, idx));
    StoreF32(v_pool.data, v_pool.type, slot * row + e,
             LoadF32(v.data, v.type, idx));
  }
}

// One warp per (token, query head). Lane l holds dims l, l + 32, … of the
// query and of the running output; each key is one warp-wide dot product,
// folded into the output by the online softmax (running max m, running
// denominator l): no score row is stored, so any context length fits.
__global__ void PagedAttentionKernel(ConstTyped q, int64_t num_tokens,
                                     int64_t num_heads, int64_t kv_heads,
                                     int64_t head_dim, ConstTyped k_pool,
                                     ConstTyped v_pool, int64_t block_size,
                                     float scale, Typed out,
                                     DeviceLayout layout) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t pair = blockIdx.x * int64_t{kAttentionWarpsPerBlock} +
                       threadIdx.x / kWarpSize;
  if (pair >= num_tokens * num_heads) return;  // whole warps leave together
  const int64_t t = pair / num_heads, h = pair % num_heads;
  const int64_t kvh = h / (num_heads / kv_heads);
  const int64_t row = kv_heads * head_dim;
  const int per_lane = static_cast<int>((head_dim + kWarpSize - 1) / kWarpSize);
  const DeviceSequence& seq = layout.sequences[layout.token_sequence[t]];
  const int64_t position = layout.token_position[t];

  float qv[kMaxHeadDimPerLane], acc[kMaxHeadDimPerLane];
#pragma unroll
  for (int r = 0; r < kMaxHeadDimPerLane; ++r) {
    const int64_t d = lane + int64_t{r} * kWarpSize;
    qv[r] = (r < per_lane && d < head_dim)
                ? LoadF32(q.data, q.type, pair * head_dim + d)
                : 0.0f;
    acc[r] = 0.0f;
  }
  float running_max = -INFINITY, denominator = 0.0f;
  for (int64_t p = 0; p <= position; ++p) {
    const int64_t base = CacheRow(layout, seq, p, block_size) * row + kvh * head_dim;
    float dot = 0.0f;
#pragma unroll
    for (int r = 0; r < kMaxHeadDimPerLane; ++r) {
      const int64_t d = lane + int64_t{r} * kWarpSize;
      if (r < per_lane && d < head_dim) {
        dot += qv[r] * LoadF32(k_pool.data, k_pool.type, base + d);
      }
    }
    const float score = WarpSum(dot) * scale;
    const float new_max = fmaxf(running_max, score);
    const float correction = expf(running_max - new_max);  // 0 on the first key
    const float weight = expf(score - new_max);
    denominator = denominator * correction + weight;
#pragma unroll
    for (int r = 0; r < kMaxHeadDimPerLane; ++r) {
      const int64_t d = lane + int64_t{r} * kWarpSize;
      if (r < per_lane && d < head_dim) {
        acc[r] = acc[r] * correction +
                 weight * LoadF32(v_pool.data, v_pool.type, base + d);
      }
    }
    running_max = new_max;
  }
  const float inv = 1.0f / denominator;
#pragma unroll
  for (int r = 0; r < kMaxHeadDimPerLane; ++r) {
    const int64_t d = lane + int64_t{r} * kWarpSize;
    if (r < per_lane && d < head_dim) {
      StoreF32(out.data, out.type, pair * head_dim + d, acc[r] * inv);
    }
  }
}

}  // namespace

void LaunchRope(Typed x, int64_t num_tokens, int64_t num_heads,
                int64_t head_dim, int64_t rotary_dim, float theta,
                const DeviceLayout& layout, cudaStream_t stream) {
  const int64_t n = num_tokens * num_heads * (rotary_dim / 2);
  if (n <= 0) return;
  TRIBUTARY_LAUNCH(RopeKernel, ElementBlocks(n), kElementThreads, stream)(
      x, num_tokens, num_heads, head_dim, rotary_dim, theta, layout);
}

void LaunchWriteKv(ConstTyped k, ConstTyped v, int64_t num_tokens,
                   int64_t kv_heads, int64_t head_dim, Typed k_pool,
                   Typed v_pool, int64_t block_size,
                   const DeviceLayout& layout, cudaStream_t stream) {
  const int64_t n = num_tokens * kv_heads * head_dim;
  if (n <= 0) return;
  TRIBUTARY_LAUNCH(WriteKvKernel, ElementBlocks(n), kElementThreads, stream)(
      k, v, num_tokens, kv_heads * head_dim, k_pool, v_pool, block_size,
      layout);
}

void LaunchPagedAttention(ConstTyped q, int64_t num_tokens, int64_t num_heads,
                          int64_t kv_heads, int64_t head_dim, ConstTyped k_pool,
                          ConstTyped v_pool, int64_t block_size, float scale,
                          Typed out, const DeviceLayout& layout,
                          cudaStream_t stream) {
  const int64_t pairs = num_tokens * num_heads;
  if (pairs <= 0) return;
  const int64_t blocks =
      (pairs + kAttentionWarpsPerBlock - 1) / kAttentionWarpsPerBlock;
  TRIBUTARY_LAUNCH(PagedAttentionKernel, static_cast<unsigned>(blocks), kAttentionWarpsPerBlock * kWarpSize, stream)(
      q, num_tokens, num_heads, kv_heads, head_dim, k_pool, v_pool, block_size,
      scale, out, layout);
}

}  // namespace cuda
}  // namespace tributary

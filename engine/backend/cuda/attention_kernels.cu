// The kernels of the gated attention layers that use the batch layout: RoPE
// at each token's position, the KV write into paged blocks, the two with
// the split and the q/k norms fused (AttentionInputsKernel), and paged
// attention in two forms:
//  - straightforward: one warp per query head and token, an online softmax
//    over the keys one at a time, no score matrix. Every query head
//    reads its keys itself, and one token's keys are walked by one warp.
//  - split (flash-decoding): a block per (token, KV head, run of keys) serves
//    every query head of the KV head's group, so each key and value row is
//    read once for the group, and a long context is spread over many blocks
//    (a decode step of one sequence otherwise runs a handful of warps). Each
//    block leaves its run's partial softmax (max, denominator, unnormalised
//    output); a second kernel merges a token's runs. A token whose keys fit
//    one run is written directly.
// Both are tested against the CPU backend (cuda_backend_test).
#include <cmath>

#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/cuda/device_common.cuh"

namespace tributary {
namespace cuda {
namespace {

constexpr int kMaxHeadDimPerLane = 16;
static_assert(kMaxHeadDimPerLane * kWarpSize == kMaxAttentionHeadDim,
              "a warp holds the largest head's row");
constexpr int kAttentionWarpsPerBlock = 4;

// The rotation of pair i (dims i and i + rotary_dim / 2) at `position`. As
// transformers: inv_freq in f32, angle = f32(position) · inv_freq.
__device__ __forceinline__ void RopeCosSin(int32_t position, int64_t i,
                                           int64_t rotary_dim, float theta,
                                           float* c, float* s) {
  const float inv_freq =
      1.0f / powf(theta, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
  const float angle = static_cast<float>(position) * inv_freq;
  *c = cosf(angle);
  *s = sinf(angle);
}

// One thread per (token, head, rotated pair).
__global__ void RopeKernel(Typed x, int64_t num_tokens, int64_t num_heads,
                           int64_t head_dim, int64_t rotary_dim, float theta,
                           DeviceLayout layout) {
  BeginAfterPriorGrids();
  const int64_t half = rotary_dim / 2;
  const int64_t n = num_tokens * num_heads * half;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < n;
       idx += int64_t{blockDim.x} * gridDim.x) {
    const int64_t i = idx % half;
    const int64_t th = idx / half;  // token · heads + head
    const int64_t t = th / num_heads;
    float c, s;
    RopeCosSin(layout.token_position[t], i, rotary_dim, theta, &c, &s);
    const int64_t base = th * head_dim;
    const float a = LoadF32(x.data, x.type, base + i);
    const float b = LoadF32(x.data, x.type, base + i + half);
    StoreF32(x.data, x.type, base + i, a * c - b * s);
    StoreF32(x.data, x.type, base + i + half, b * c + a * s);
  }
}

// Backend::AttentionInputs in one kernel: a warp per (token, head), the
// query heads first, then the KV heads. Lane l holds dims l, l + 32, … of
// the head's row; the sum of squares is a warp sum; the normed row goes
// through shared memory so that each lane can read the partner of its
// rotated dims (i and i ± rotary_dim / 2 are in other lanes unless the
// half is a multiple of 32). Nothing is rounded between the norm and the
// rotation. A query head also copies its gate rows; a KV head writes its
// normed, rotated k and its v into the pools at the token's position.
constexpr int kInputsWarpsPerBlock = 4;

__global__ void AttentionInputsKernel(ConstTyped q_and_gate, ConstTyped k,
                                      ConstTyped v, ConstTyped q_norm,
                                      ConstTyped k_norm, float eps,
                                      int64_t num_heads, int64_t kv_heads,
                                      int64_t head_dim, int64_t rotary_dim,
                                      float theta, Typed q, Typed gate,
                                      Typed k_pool, Typed v_pool,
                                      int64_t block_size, DeviceLayout layout) {
  BeginAfterPriorGrids();
  __shared__ float normed[kInputsWarpsPerBlock][kMaxHeadDimPerLane * kWarpSize];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int64_t t = blockIdx.x;
  const int64_t slot = blockIdx.y * int64_t{kInputsWarpsPerBlock} + warp;
  if (slot >= num_heads + kv_heads) return;  // whole warps leave together
  const bool is_query = slot < num_heads;
  const int64_t head = is_query ? slot : slot - num_heads;
  // The head's input row and its norm weight.
  const ConstTyped x = is_query ? q_and_gate : k;
  const int64_t x_base = is_query ? (t * num_heads + head) * 2 * head_dim
                                  : (t * kv_heads + head) * head_dim;
  const ConstTyped w = is_query ? q_norm : k_norm;
  float values[kMaxHeadDimPerLane];
  float sum_sq = 0.0f;
#pragma unroll
  for (int r = 0; r < kMaxHeadDimPerLane; ++r) {
    const int64_t i = lane + int64_t{r} * kWarpSize;
    values[r] = i < head_dim ? LoadF32(x.data, x.type, x_base + i) : 0.0f;
    sum_sq += values[r] * values[r];
  }
  const float inv_rms = RmsFactor(WarpSum(sum_sq), head_dim, eps);
  float* row = normed[warp];
#pragma unroll
  for (int r = 0; r < kMaxHeadDimPerLane; ++r) {
    const int64_t i = lane + int64_t{r} * kWarpSize;
    if (i < head_dim) {
      row[i] = values[r] * inv_rms * (1.0f + LoadF32(w.data, w.type, i));
    }
  }
  __syncwarp();
  const int32_t position = layout.token_position[t];
  const int64_t half = rotary_dim / 2;
  int64_t out_base;
  Typed out;
  if (is_query) {
    out = q;
    out_base = (t * num_heads + head) * head_dim;
  } else {
    const DeviceSequence& seq = layout.sequences[layout.token_sequence[t]];
    out = k_pool;
    out_base = (CacheRow(layout, seq, position, block_size) * kv_heads + head) *
               head_dim;
  }
  for (int64_t i = lane; i < head_dim; i += kWarpSize) {
    float value = row[i];
    if (i < rotary_dim) {
      float c, s;
      RopeCosSin(position, i < half ? i : i - half, rotary_dim, theta, &c, &s);
      value = i < half ? row[i] * c - row[i + half] * s
                       : row[i] * c + row[i - half] * s;
    }
    StoreF32(out.data, out.type, out_base + i, value);
    if (is_query) {
      StoreF32(gate.data, gate.type, out_base + i,
               LoadF32(q_and_gate.data, q_and_gate.type, x_base + head_dim + i));
    } else {
      StoreF32(v_pool.data, v_pool.type, out_base + i,
               LoadF32(v.data, v.type, (t * kv_heads + head) * head_dim + i));
    }
  }
}

__global__ void WriteKvKernel(ConstTyped k, ConstTyped v, int64_t num_tokens,
                              int64_t row, Typed k_pool, Typed v_pool,
                              int64_t block_size, DeviceLayout layout) {
  BeginAfterPriorGrids();
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
  BeginAfterPriorGrids();
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

// --- Split attention (flash-decoding) -------------------------------------------

// Query heads of one KV head served by one block, and dims per lane (the
// backend uses the straightforward kernel for larger heads).
constexpr int kSplitGroupHeads = static_cast<int>(kSplitAttentionHeadsPerBlock);
constexpr int kSplitDimsPerLane =
    static_cast<int>(kSplitAttentionMaxHeadDim / kWarpSize);
constexpr int kSplitWarps = 4;

// Lane l holds dims l·per … l·per + per − 1 of a row: contiguous, so that a
// lane's share of a bf16 row of 256 (the 27B's heads) is one 16-byte load
// when aligned; other types and widths load element by element.
__device__ __forceinline__ void LoadRowSlice(ConstTyped src, int64_t base,
                                             int lane, int per,
                                             int64_t head_dim,
                                             float (&out)[kSplitDimsPerLane]) {
  static_assert(kSplitDimsPerLane == 8, "one 16-byte load of bf16");
  const auto* bf16 = static_cast<const __nv_bfloat16*>(src.data) + base +
                     int64_t{lane} * per;
  // Whole shares only: at a head of 225–255 dims the last lanes' eight
  // would run into the next head.
  if (src.type == ElementType::kBF16 && per == kSplitDimsPerLane &&
      int64_t{lane + 1} * per <= head_dim &&
      reinterpret_cast<uintptr_t>(bf16) % 16 == 0) {
    LoadBf16x8(bf16, out);
    return;
  }
#pragma unroll
  for (int r = 0; r < kSplitDimsPerLane; ++r) {
    const int64_t d = int64_t{lane} * per + r;
    out[r] = (r < per && d < head_dim) ? LoadF32(src.data, src.type, base + d)
                                       : 0.0f;
  }
}

// Grid (token, KV head · head groups, run). Warp w of the block takes keys
// run_begin + w, + 4, …; each keeps, for each of its query heads, the
// online softmax's running max, denominator and output; the four warps'
// states are merged in shared memory at the end.
__global__ void SplitAttentionKernel(ConstTyped q, int64_t num_heads,
                                     int64_t kv_heads, int64_t head_dim,
                                     ConstTyped k_pool, ConstTyped v_pool,
                                     int64_t block_size, float scale,
                                     int64_t min_run_keys, int64_t max_runs,
                                     Typed out, float* partial_stats,
                                     float* partial_out, bool skip_flash,
                                     DeviceLayout layout) {
  BeginAfterPriorGrids();
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const SplitBlock block = SplitBlockOf(layout, skip_flash, num_heads, kv_heads,
                                       kSplitGroupHeads, min_run_keys, max_runs);
  if (block.empty) return;  // the whole block: this token is shorter
  const int64_t rank = block.rank, t = block.token, kvh = block.kvh;
  const int64_t first_head = block.first_head, heads_here = block.heads_here;
  const int64_t key_begin = block.key_begin, key_end = block.key_end;
  const int64_t run = block.run, runs = block.runs;
  const DeviceSequence& seq = layout.sequences[layout.token_sequence[t]];
  const int per = static_cast<int>((head_dim + kWarpSize - 1) / kWarpSize);
  const int64_t row = kv_heads * head_dim;

  float qv[kSplitGroupHeads][kSplitDimsPerLane];
  float acc[kSplitGroupHeads][kSplitDimsPerLane];
  float running_max[kSplitGroupHeads], denominator[kSplitGroupHeads];
#pragma unroll
  for (int g = 0; g < kSplitGroupHeads; ++g) {
    if (g < heads_here) {
      LoadRowSlice(q, (t * num_heads + first_head + g) * head_dim, lane, per,
                   head_dim, qv[g]);
    }
#pragma unroll
    for (int r = 0; r < kSplitDimsPerLane; ++r) acc[g][r] = 0.0f;
    running_max[g] = -INFINITY;
    denominator[g] = 0.0f;
  }
  for (int64_t p = key_begin + warp; p < key_end; p += kSplitWarps) {
    const int64_t base = CacheRow(layout, seq, p, block_size) * row + kvh * head_dim;
    float key[kSplitDimsPerLane], value[kSplitDimsPerLane];
    LoadRowSlice(k_pool, base, lane, per, head_dim, key);
    LoadRowSlice(v_pool, base, lane, per, head_dim, value);
#pragma unroll
    for (int g = 0; g < kSplitGroupHeads; ++g) {
      if (g >= heads_here) continue;  // uniform across the block
      float dot = 0.0f;
#pragma unroll
      for (int r = 0; r < kSplitDimsPerLane; ++r) dot += qv[g][r] * key[r];
      const float score = WarpSum(dot) * scale;
      const float new_max = fmaxf(running_max[g], score);
      const float correction = expf(running_max[g] - new_max);  // 0 at first
      const float weight = expf(score - new_max);
      denominator[g] = denominator[g] * correction + weight;
#pragma unroll
      for (int r = 0; r < kSplitDimsPerLane; ++r) {
        acc[g][r] = acc[g][r] * correction + weight * value[r];
      }
      running_max[g] = new_max;
    }
  }

  // Merge the warps' states. A warp that drew no key has max −∞ and weighs
  // nothing (some warp drew key_begin, so the merged max is finite).
  __shared__ float warp_max[kSplitWarps][kSplitGroupHeads];
  __shared__ float warp_denominator[kSplitWarps][kSplitGroupHeads];
  __shared__ float warp_out[kSplitWarps][kSplitGroupHeads]
                           [kSplitDimsPerLane * kWarpSize];
#pragma unroll
  for (int g = 0; g < kSplitGroupHeads; ++g) {
    if (lane == 0) {
      warp_max[warp][g] = running_max[g];
      warp_denominator[warp][g] = denominator[g];
    }
#pragma unroll
    for (int r = 0; r < kSplitDimsPerLane; ++r) {
      const int64_t d = int64_t{lane} * per + r;
      if (r < per && d < head_dim) warp_out[warp][g][d] = acc[g][r];
    }
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < heads_here * head_dim; i += blockDim.x) {
    const int64_t g = i / head_dim, d = i % head_dim;
    float merged_max = -INFINITY;
    for (int w = 0; w < kSplitWarps; ++w) merged_max = fmaxf(merged_max, warp_max[w][g]);
    float merged_denominator = 0.0f, merged_out = 0.0f;
    for (int w = 0; w < kSplitWarps; ++w) {
      const float f = expf(warp_max[w][g] - merged_max);
      merged_denominator += warp_denominator[w][g] * f;
      merged_out += warp_out[w][g][d] * f;
    }
    const int64_t head = first_head + g;
    if (runs == 1) {
      StoreF32(out.data, out.type, (t * num_heads + head) * head_dim + d,
               merged_out / merged_denominator);
    } else {
      const int64_t slot = (rank * num_heads + head) * max_runs + run;
      partial_out[slot * head_dim + d] = merged_out;
      if (d == 0) {
        partial_stats[2 * slot] = merged_max;
        partial_stats[2 * slot + 1] = merged_denominator;
      }
    }
  }
}

// Grid (token, head): merges a token's runs (when it has more than one) as
// the online softmax would have: every run's output and denominator scaled
// by e^(its max − the overall max).
__global__ void MergeAttentionRunsKernel(int64_t num_heads, int64_t head_dim,
                                         int64_t min_run_keys, int64_t max_runs,
                                         const float* partial_stats,
                                         const float* partial_out, Typed out,
                                         bool skip_flash, DeviceLayout layout) {
  BeginAfterPriorGrids();
  const int64_t rank = blockIdx.x, head = blockIdx.y;
  const int64_t t = skip_flash ? layout.split_tokens[rank] : rank;
  const int64_t num_keys = int64_t{layout.token_position[t]} + 1;
  const int64_t run_keys = SplitRunKeys(num_keys, min_run_keys, max_runs);
  const int64_t runs = (num_keys + run_keys - 1) / run_keys;
  if (runs <= 1) return;  // written by the split kernel
  const int64_t first = (rank * num_heads + head) * max_runs;
  float merged_max = -INFINITY;
  for (int64_t r = 0; r < runs; ++r) {
    merged_max = fmaxf(merged_max, partial_stats[2 * (first + r)]);
  }
  float merged_denominator = 0.0f;
  for (int64_t r = 0; r < runs; ++r) {
    merged_denominator += partial_stats[2 * (first + r) + 1] *
                          expf(partial_stats[2 * (first + r)] - merged_max);
  }
  const float inv = 1.0f / merged_denominator;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float sum = 0.0f;
    for (int64_t r = 0; r < runs; ++r) {
      sum += partial_out[(first + r) * head_dim + d] *
             expf(partial_stats[2 * (first + r)] - merged_max);
    }
    StoreF32(out.data, out.type, (t * num_heads + head) * head_dim + d, sum * inv);
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

void LaunchAttentionInputs(ConstTyped q_and_gate, ConstTyped k, ConstTyped v,
                           ConstTyped q_norm, ConstTyped k_norm, float eps,
                           int64_t num_tokens, int64_t num_heads,
                           int64_t kv_heads, int64_t head_dim,
                           int64_t rotary_dim, float theta, Typed q, Typed gate,
                           Typed k_pool, Typed v_pool, int64_t block_size,
                           const DeviceLayout& layout, cudaStream_t stream) {
  if (num_tokens <= 0 || num_heads + kv_heads <= 0) return;
  const dim3 grid(static_cast<unsigned>(num_tokens),
                  static_cast<unsigned>((num_heads + kv_heads + kInputsWarpsPerBlock - 1) /
                                        kInputsWarpsPerBlock));
  TRIBUTARY_LAUNCH(AttentionInputsKernel, grid, kInputsWarpsPerBlock * kWarpSize, stream)(
      q_and_gate, k, v, q_norm, k_norm, eps, num_heads, kv_heads, head_dim,
      rotary_dim, theta, q, gate, k_pool, v_pool, block_size, layout);
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

void LaunchSplitAttention(ConstTyped q, int64_t num_rows, int64_t num_heads,
                          int64_t kv_heads, int64_t head_dim, ConstTyped k_pool,
                          ConstTyped v_pool, int64_t block_size, float scale,
                          int64_t min_run_keys, int64_t max_runs,
                          float* partial_stats, float* partial_out, Typed out,
                          bool skip_flash, const DeviceLayout& layout,
                          cudaStream_t stream) {
  if (num_rows <= 0 || num_heads <= 0) return;
  const dim3 grid(static_cast<unsigned>(num_rows),
                  static_cast<unsigned>(SplitBlocksPerRow(num_heads, kv_heads, kSplitGroupHeads)),
                  static_cast<unsigned>(max_runs));
  TRIBUTARY_LAUNCH(SplitAttentionKernel, grid, kSplitWarps * kWarpSize, stream)(
      q, num_heads, kv_heads, head_dim, k_pool, v_pool, block_size, scale,
      min_run_keys, max_runs, out, partial_stats, partial_out, skip_flash, layout);
}

void LaunchMergeAttentionRuns(int64_t num_rows, int64_t num_heads,
                              int64_t head_dim, int64_t min_run_keys,
                              int64_t max_runs, const float* partial_stats,
                              const float* partial_out, Typed out,
                              bool skip_flash, const DeviceLayout& layout,
                              cudaStream_t stream) {
  if (num_rows <= 0 || num_heads <= 0 || max_runs <= 1) return;
  const dim3 grid(static_cast<unsigned>(num_rows), static_cast<unsigned>(num_heads));
  TRIBUTARY_LAUNCH(MergeAttentionRunsKernel, grid, 128, stream)(
      num_heads, head_dim, min_run_keys, max_runs, partial_stats, partial_out,
      out, skip_flash, layout);
}

}  // namespace cuda
}  // namespace tributary

// Causal attention for the prefill sequences of a step on the tensor cores
// (flash attention): a block per (64 query tokens of one sequence, query
// head), its 4 warps each 16 query rows; key and value tiles of 32 rows
// staged in shared memory from the paged cache; scores and the output
// products by mma.sync (mma.cuh), bf16 inputs, f32 accumulation; an online
// softmax per row, so no score matrix is stored. The scores' accumulator
// fragments are the next product's A fragments (same rows, adjacent
// columns), so the probabilities never leave registers.
//
// bf16 activations and cache only, head_dim a multiple of 16 up to 256: the
// backend uses the split kernel otherwise (f32 activations among them, whose
// purpose is to check the maths without bf16 rounding).
#include <cmath>

#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/cuda/device_common.cuh"
#include "engine/backend/cuda/mma.cuh"

namespace tributary {
namespace cuda {
namespace {

constexpr int kFlashWarps = 4;
constexpr int kFlashRows = 16 * kFlashWarps;  // query tokens per block
static_assert(kFlashRows == kFlashTileTokens, "a tile is the block's rows");
constexpr int kFlashKeys = 32;                // keys per tile
constexpr int kMaxKSteps = static_cast<int>(kFlashMaxHeadDim / 16);
constexpr int kMaxDimTiles = static_cast<int>(kFlashMaxHeadDim / 8);
// Padding of a staged row, in bf16: rows 264 elements apart put the 8 rows a
// fragment load touches on different banks.
constexpr int kRowPad = 8;
constexpr int kStagedRow = static_cast<int>(kFlashMaxHeadDim) + kRowPad;

__device__ __forceinline__ uint16_t Bits(const __nv_bfloat16& x) {
#if defined(TRIBUTARY_CUDA_EMULATION)
  return x.bits;
#else
  return __bfloat16_as_ushort(x);
#endif
}

// Two adjacent bf16 of a row as one register (the lower index low).
__device__ __forceinline__ uint32_t PairAt(const __nv_bfloat16* row, int i) {
  return PackBits(Bits(row[i]), Bits(row[i + 1]));
}

// Grid (query tile, query head). layout.flash_tiles[2 · tile] is the
// sequence, [2 · tile + 1] the tile's first token within its step.
__global__ void FlashAttentionKernel(const __nv_bfloat16* q, int64_t num_heads,
                                     int64_t kv_heads, int64_t head_dim,
                                     const __nv_bfloat16* k_pool,
                                     const __nv_bfloat16* v_pool,
                                     int64_t block_size, float scale,
                                     __nv_bfloat16* out, DeviceLayout layout) {
  BeginAfterPriorGrids();
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const int64_t h = blockIdx.y;
  const int64_t kvh = h / (num_heads / kv_heads);
  const DeviceSequence seq = layout.sequences[layout.flash_tiles[2 * blockIdx.x]];
  const int64_t tile_start = layout.flash_tiles[2 * blockIdx.x + 1];
  const int64_t rows_here = seq.num_tokens - tile_start < kFlashRows
                                ? seq.num_tokens - tile_start
                                : kFlashRows;
  const int k_steps = static_cast<int>(head_dim / 16);
  const int dim_tiles = static_cast<int>(head_dim / 8);
  const int64_t kv_row = kv_heads * head_dim;

  // This thread's two query rows (tile-relative) and their positions.
  int64_t row[2], position[2];
  bool valid[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row[r] = warp * 16 + g + 8 * r;
    valid[r] = row[r] < rows_here;
    position[r] = seq.first_position + tile_start + row[r];
  }
  const int64_t num_keys = seq.first_position + tile_start + rows_here;

  // The queries as A fragments, k-step by k-step (zero for padded rows).
  uint32_t qa[kMaxKSteps][4];
#pragma unroll
  for (int ks = 0; ks < kMaxKSteps; ++ks) {
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      const int r = reg & 1;
      const int col = 16 * ks + 2 * t + (reg >= 2 ? 8 : 0);
      qa[ks][reg] = 0;
      if (ks < k_steps && valid[r]) {
        const int64_t token = seq.token_offset + tile_start + row[r];
        qa[ks][reg] = PairAt(q + (token * num_heads + h) * head_dim, col);
      }
    }
  }
  float o[kMaxDimTiles][4];
#pragma unroll
  for (int n = 0; n < kMaxDimTiles; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) o[n][i] = 0.0f;
  }
  float running_max[2] = {-INFINITY, -INFINITY};
  float partial_sum[2] = {0.0f, 0.0f};  // this lane's columns only

  alignas(16) __shared__ __nv_bfloat16 keys[kFlashKeys][kStagedRow];
  alignas(16) __shared__ __nv_bfloat16 values[kFlashKeys][kStagedRow];
  // Staged 16 bytes (8 bf16) at a time: head_dim is a multiple of 16, the
  // pools' rows and the staged rows (264 elements) are 16-byte aligned.
  const int chunks_per_row = static_cast<int>(head_dim / 8);
  __shared__ int64_t key_base[kFlashKeys];  // a tile key's pool row, or -1
  for (int64_t key0 = 0; key0 < num_keys; key0 += kFlashKeys) {
    // (1) Every warp is done with the previous tile.
    __syncthreads();
    if (threadIdx.x < kFlashKeys) {
      const int64_t p = key0 + threadIdx.x;
      key_base[threadIdx.x] =
          p < num_keys ? CacheRow(layout, seq, p, block_size) * kv_row +
                             kvh * head_dim
                       : -1;
    }
    __syncthreads();
    // By cp.async: a thread's 16 copies are all in flight at once (a copy
    // through registers waited for each load before its store, ~8 round
    // trips to memory a tile).
    for (int idx = threadIdx.x; idx < kFlashKeys * chunks_per_row;
         idx += blockDim.x) {
      const int key = idx / chunks_per_row;
      const int d = 8 * (idx % chunks_per_row);
      const int64_t base = key_base[key];
      if (base >= 0) {
        CopyAsync16Bytes(&keys[key][d], k_pool + base + d);
        CopyAsync16Bytes(&values[key][d], v_pool + base + d);
      } else {
        for (int i = 0; i < 8; ++i) {
          keys[key][d + i] = __float2bfloat16_rn(0.0f);
          values[key][d + i] = __float2bfloat16_rn(0.0f);
        }
      }
    }
    WaitAsyncCopies();
    // (2) The tile is staged (every thread's copies).
    __syncthreads();

    // Scores of this warp's 16 rows against the tile's 32 keys: 4 n-tiles,
    // the k-steps outermost so that the 4 n-tiles' products are
    // independent neighbours (each n-tile's sum still runs over ks in
    // order).
    float s[kFlashKeys / 8][4];
#pragma unroll
    for (int n = 0; n < kFlashKeys / 8; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) s[n][i] = 0.0f;
    }
#pragma unroll
    for (int ks = 0; ks < kMaxKSteps; ++ks) {
      if (ks >= k_steps) break;
#pragma unroll
      for (int n = 0; n < kFlashKeys / 8; ++n) {
        const uint32_t b[2] = {PairAt(keys[n * 8 + g], 16 * ks + 2 * t),
                               PairAt(keys[n * 8 + g], 16 * ks + 8 + 2 * t)};
        MmaBf16(s[n], qa[ks], b, s[n]);
      }
    }
    // Scale and mask (a key after the row's position, or past the tile's
    // keys, or a padded row), then the softmax step.
#pragma unroll
    for (int n = 0; n < kFlashKeys / 8; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i >> 1;
        const int64_t key = key0 + n * 8 + 2 * t + (i & 1);
        const bool visible = valid[r] && key <= position[r];
        s[n][i] = visible ? s[n][i] * scale : -INFINITY;
      }
    }
    float correction[2];
    uint32_t pa[kFlashKeys / 16][4];  // P [16 × 32]: two k-steps of 16 keys
    OnlineSoftmaxTile(s, running_max, partial_sum, correction, pa);
    // O ← O · correction + P V, 8 output dims per n-tile.
#pragma unroll
    for (int n = 0; n < kMaxDimTiles; ++n) {
      if (n >= dim_tiles) break;
      o[n][0] *= correction[0];
      o[n][1] *= correction[0];
      o[n][2] *= correction[1];
      o[n][3] *= correction[1];
#pragma unroll
      for (int kk = 0; kk < kFlashKeys / 16; ++kk) {
        const int dim = n * 8 + g;
        const int k0 = 16 * kk + 2 * t;
        const uint32_t b[2] = {
            PackBits(Bits(values[k0][dim]), Bits(values[k0 + 1][dim])),
            PackBits(Bits(values[k0 + 8][dim]), Bits(values[k0 + 9][dim]))};
        MmaBf16(o[n], pa[kk], b, o[n]);
      }
    }
  }

  // The rows' sums over the group's 4 lanes, and the normalised output.
  float inverse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = partial_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    inverse[r] = 1.0f / sum;
  }
#pragma unroll
  for (int n = 0; n < kMaxDimTiles; ++n) {
    if (n >= dim_tiles) break;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (!valid[r]) continue;
      const int64_t token = seq.token_offset + tile_start + row[r];
      __nv_bfloat16* dst = out + (token * num_heads + h) * head_dim + n * 8 + 2 * t;
      dst[0] = __float2bfloat16_rn(o[n][2 * r] * inverse[r]);
      dst[1] = __float2bfloat16_rn(o[n][2 * r + 1] * inverse[r]);
    }
  }
}

}  // namespace

void LaunchFlashAttention(const void* q, int64_t num_heads, int64_t kv_heads,
                          int64_t head_dim, const void* k_pool,
                          const void* v_pool, int64_t block_size, float scale,
                          void* out, const DeviceLayout& layout,
                          cudaStream_t stream) {
  if (layout.num_flash_tiles <= 0 || num_heads <= 0) return;
  const dim3 grid(static_cast<unsigned>(layout.num_flash_tiles),
                  static_cast<unsigned>(num_heads));
  TRIBUTARY_LAUNCH(FlashAttentionKernel, grid, kFlashWarps * kWarpSize, stream)(
      static_cast<const __nv_bfloat16*>(q), num_heads, kv_heads, head_dim,
      static_cast<const __nv_bfloat16*>(k_pool),
      static_cast<const __nv_bfloat16*>(v_pool), block_size, scale,
      static_cast<__nv_bfloat16*>(out), layout);
}

}  // namespace cuda
}  // namespace tributary

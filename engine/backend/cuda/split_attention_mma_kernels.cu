// The split attention (flash-decoding) of attention_kernels.cu on the tensor
// cores, for bf16 q, pools and out with head_dim a multiple of 16 up to
// kFlashMaxHeadDim: the decode rows of a step (and short chunks' tokens).
//
// Why a second form: the CUDA-core kernel takes a key at a time per warp,
// one 1 KiB row of K and V in flight, then reduces each query head's dot
// product across the warp (a chain of five shuffles per head and key). At
// the 27B's decode (6 query heads per KV head, 256 dims) that chain, not
// the memory, sets its pace, and at 2 blocks a multiprocessor (215
// registers) few rows are in flight: by estimate under a third of the
// bandwidth that batch 64's ~4 GB of keys and values a step need.
//
// Here a block serves one row (token), up to 16 query heads of one KV head
// (the mma's 16 rows; heads past the group are zero rows) and one run of
// keys. Each of its 2 warps takes tiles of 16 keys in turn: the tile's K
// and V rows (16 KiB at 256 dims) go to the warp's own shared stage by
// cp.async, all in flight at once and without registers; then the scores
// S [16 heads × 16 keys] = Q Kᵀ and O += P V are mma.sync products (the
// flash kernel's fragments: the scores' accumulators are P's A fragments),
// with an online softmax per head. The warps' states merge through shared
// memory at the end, into `out` or, for a row of several runs, into the
// partials that MergeAttentionRunsKernel combines (the CUDA-core kernel's
// layout).
#include <cmath>

#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/cuda/device_common.cuh"
#include "engine/backend/cuda/mma.cuh"

namespace tributary {
namespace cuda {
namespace {

constexpr int kMmaWarps = 2;
constexpr int kMmaHeads = static_cast<int>(kSplitAttentionMmaHeadsPerBlock);  // the mma's rows
constexpr int kMmaKeys = 16;   // keys per warp tile: one k-step of P V
constexpr int kMaxKSteps = static_cast<int>(kFlashMaxHeadDim / 16);
constexpr int kMaxDimTiles = static_cast<int>(kFlashMaxHeadDim / 8);
// A staged row in 32-bit words (bf16 pairs): 128 for 256 dims, plus 4 so
// that the 8 rows a fragment load touches start on different banks.
constexpr int kRowWords = static_cast<int>(kFlashMaxHeadDim / 2) + 4;
// The shared memory: while the keys run, each warp's K and V stage; at the
// end, the warps' outputs [warps, heads, head_dim] and their maxima and
// denominators (f32 as bits), which fit in the stages' place.
constexpr int kStageWords = kMmaWarps * 2 * kMmaKeys * kRowWords;
constexpr int kMergeWords = kMmaWarps * kMmaHeads * (static_cast<int>(kFlashMaxHeadDim) + 4 + 2);
static_assert(kMergeWords <= kStageWords, "the merge reuses the stages");
static_assert(kStageWords * 4 <= 48 * 1024, "static shared memory");

__device__ __forceinline__ uint32_t LowHalf(uint32_t pair) { return pair & 0xffffu; }
__device__ __forceinline__ uint32_t HighHalf(uint32_t pair) { return pair >> 16; }

// Grid (row, KV head · head groups of 16, run); kMmaWarps warps.
__global__ void SplitAttentionMmaKernel(const uint16_t* q, int64_t num_heads,
                                        int64_t kv_heads, int64_t head_dim,
                                        const uint16_t* k_pool,
                                        const uint16_t* v_pool,
                                        int64_t block_size, float scale,
                                        int64_t min_run_keys, int64_t max_runs,
                                        uint16_t* out, float* partial_stats,
                                        float* partial_out, bool skip_flash,
                                        DeviceLayout layout) {
  BeginAfterPriorGrids();
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int g = lane / 4, t = lane % 4;
  const SplitBlock block = SplitBlockOf(layout, skip_flash, num_heads, kv_heads,
                                       kMmaHeads, min_run_keys, max_runs);
  if (block.empty) return;  // the whole block: this row is shorter
  const int64_t rank = block.rank, token = block.token, kvh = block.kvh;
  const int64_t first_head = block.first_head;
  const int heads_here = static_cast<int>(block.heads_here);
  const int64_t key_begin = block.key_begin, key_end = block.key_end;
  const int64_t run = block.run, runs = block.runs;
  const DeviceSequence& seq = layout.sequences[layout.token_sequence[token]];
  const int k_steps = static_cast<int>(head_dim / 16);
  const int dim_tiles = static_cast<int>(head_dim / 8);
  const int64_t kv_row = kv_heads * head_dim;

  // The heads as A fragments (rows g and g + 8; zero past the group).
  const uint32_t* q_pairs = reinterpret_cast<const uint32_t*>(q);
  uint32_t qa[kMaxKSteps][4];
#pragma unroll
  for (int ks = 0; ks < kMaxKSteps; ++ks) {
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      const int row = g + 8 * (reg & 1);
      const int word = 8 * ks + t + (reg >= 2 ? 4 : 0);
      qa[ks][reg] = 0;
      if (ks < k_steps && row < heads_here) {
        qa[ks][reg] = q_pairs[((token * num_heads + first_head + row) * head_dim) / 2 + word];
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

  alignas(16) __shared__ uint32_t smem[kStageWords];
  __shared__ int64_t key_base[kMmaWarps][kMmaKeys];  // a tile key's pool row, or -1
  uint32_t(*keys)[kRowWords] =
      reinterpret_cast<uint32_t(*)[kRowWords]>(smem + warp * 2 * kMmaKeys * kRowWords);
  uint32_t(*values)[kRowWords] = keys + kMmaKeys;
  const int chunks_per_row = static_cast<int>(head_dim / 8);  // 16 bytes each

  for (int64_t key0 = key_begin + int64_t{warp} * kMmaKeys; key0 < key_end;
       key0 += int64_t{kMmaWarps} * kMmaKeys) {
    // (1) The warp is done with its previous tile.
    __syncwarp();
    if (lane < kMmaKeys) {
      const int64_t p = key0 + lane;
      key_base[warp][lane] =
          p < key_end ? CacheRow(layout, seq, p, block_size) * kv_row + kvh * head_dim
                      : -1;
    }
    __syncwarp();
    for (int idx = lane; idx < kMmaKeys * chunks_per_row; idx += kWarpSize) {
      const int key = idx / chunks_per_row;
      const int word = 4 * (idx % chunks_per_row);
      const int64_t base = key_base[warp][key];
      if (base >= 0) {
        CopyAsync16Bytes(&keys[key][word], k_pool + base + 2 * word);
        CopyAsync16Bytes(&values[key][word], v_pool + base + 2 * word);
      } else {
        // Zeros, not stale rows: a masked key's probability is 0, and
        // 0 · NaN would not be.
        for (int i = 0; i < 4; ++i) {
          keys[key][word + i] = 0;
          values[key][word + i] = 0;
        }
      }
    }
    WaitAsyncCopies();
    // (2) The tile is staged (every lane's copies).
    __syncwarp();

    // Scores of the 16 heads against the tile's 16 keys: 2 n-tiles of 8,
    // the k-steps outermost (the n-tiles' products independent neighbours).
    float s[kMmaKeys / 8][4];
#pragma unroll
    for (int n = 0; n < kMmaKeys / 8; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) s[n][i] = 0.0f;
    }
#pragma unroll
    for (int ks = 0; ks < kMaxKSteps; ++ks) {
      if (ks >= k_steps) break;
#pragma unroll
      for (int n = 0; n < kMmaKeys / 8; ++n) {
        const uint32_t b[2] = {keys[n * 8 + g][8 * ks + t], keys[n * 8 + g][8 * ks + 4 + t]};
        MmaBf16(s[n], qa[ks], b, s[n]);
      }
    }
    // Scale and mask the keys past the run (the tile's first key is in it,
    // so every head's max is finite after the first tile), then the
    // softmax step; P [16 heads × 16 keys] is one k-step.
#pragma unroll
    for (int n = 0; n < kMmaKeys / 8; ++n) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t key = key0 + n * 8 + 2 * t + (i & 1);
        s[n][i] = key < key_end ? s[n][i] * scale : -INFINITY;
      }
    }
    float correction[2];
    uint32_t pa[1][4];
    OnlineSoftmaxTile(s, running_max, partial_sum, correction, pa);
    // O ← O · correction + P V, 8 output dims per n-tile: B holds V at
    // keys 2t, 2t + 1 (register 0) and 2t + 8, 2t + 9 (register 1), dim g.
#pragma unroll
    for (int n = 0; n < kMaxDimTiles; ++n) {
      if (n >= dim_tiles) break;
      o[n][0] *= correction[0];
      o[n][1] *= correction[0];
      o[n][2] *= correction[1];
      o[n][3] *= correction[1];
      const int dim = n * 8 + g;
      const int word = dim / 2;
      const bool high = (dim & 1) != 0;
      auto half = [&](int key) {
        const uint32_t pair = values[key][word];
        return high ? HighHalf(pair) : LowHalf(pair);
      };
      const uint32_t b[2] = {half(2 * t) | (half(2 * t + 1) << 16),
                             half(2 * t + 8) | (half(2 * t + 9) << 16)};
      MmaBf16(o[n], pa[0], b, o[n]);
    }
  }

  // The heads' denominators over the group's 4 lanes. A warp that drew no
  // tile has max −∞ and weighs nothing in the merge (warp 0 drew the
  // run's first key, so the merged max is finite).
  float denominator[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = partial_sum[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    denominator[r] = sum;
  }
  // (3) Every warp is done with its stage: the merge area takes its place.
  __syncthreads();
  // Rows 4 words longer than a head: at 256 dims the 8 row groups of a
  // fragment's stores would otherwise share banks.
  const int64_t out_stride = head_dim + 4;
  uint32_t* merge_out = smem;  // [warps][heads][head_dim]
  uint32_t* merge_max = smem + kMmaWarps * kMmaHeads * out_stride;
  uint32_t* merge_denominator = merge_max + kMmaWarps * kMmaHeads;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    if (row >= heads_here) continue;
    uint32_t* dst = merge_out + (warp * kMmaHeads + row) * out_stride;
#pragma unroll
    for (int n = 0; n < kMaxDimTiles; ++n) {
      if (n >= dim_tiles) break;
      dst[n * 8 + 2 * t] = __float_as_uint(o[n][2 * r]);
      dst[n * 8 + 2 * t + 1] = __float_as_uint(o[n][2 * r + 1]);
    }
    if (t == 0) {
      merge_max[warp * kMmaHeads + row] = __float_as_uint(running_max[r]);
      merge_denominator[warp * kMmaHeads + row] = __float_as_uint(denominator[r]);
    }
  }
  // (4) The warps' states are in.
  __syncthreads();
  for (int64_t i = threadIdx.x; i < heads_here * head_dim; i += blockDim.x) {
    const int64_t row = i / head_dim, d = i % head_dim;
    float merged_max = -INFINITY;
    for (int w = 0; w < kMmaWarps; ++w) {
      merged_max = fmaxf(merged_max, __uint_as_float(merge_max[w * kMmaHeads + row]));
    }
    float merged_denominator = 0.0f, merged_out = 0.0f;
    for (int w = 0; w < kMmaWarps; ++w) {
      const float f = expf(__uint_as_float(merge_max[w * kMmaHeads + row]) - merged_max);
      merged_denominator += __uint_as_float(merge_denominator[w * kMmaHeads + row]) * f;
      merged_out += __uint_as_float(merge_out[(w * kMmaHeads + row) * out_stride + d]) * f;
    }
    const int64_t head = first_head + row;
    if (runs == 1) {
      StoreF32(out, ElementType::kBF16, (token * num_heads + head) * head_dim + d,
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

}  // namespace

void LaunchSplitAttentionMma(const void* q, int64_t num_rows, int64_t num_heads,
                             int64_t kv_heads, int64_t head_dim,
                             const void* k_pool, const void* v_pool,
                             int64_t block_size, float scale,
                             int64_t min_run_keys, int64_t max_runs,
                             float* partial_stats, float* partial_out, void* out,
                             bool skip_flash, const DeviceLayout& layout,
                             cudaStream_t stream) {
  if (num_rows <= 0 || num_heads <= 0) return;
  const dim3 grid(static_cast<unsigned>(num_rows),
                  static_cast<unsigned>(SplitBlocksPerRow(num_heads, kv_heads, kMmaHeads)),
                  static_cast<unsigned>(max_runs));
  TRIBUTARY_LAUNCH(SplitAttentionMmaKernel, grid, kMmaWarps * kWarpSize, stream)(
      static_cast<const uint16_t*>(q), num_heads, kv_heads, head_dim,
      static_cast<const uint16_t*>(k_pool), static_cast<const uint16_t*>(v_pool),
      block_size, scale, min_run_keys, max_runs, static_cast<uint16_t*>(out),
      partial_stats, partial_out, skip_flash, layout);
}

}  // namespace cuda
}  // namespace tributary

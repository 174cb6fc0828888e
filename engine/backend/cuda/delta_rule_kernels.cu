// The kernels of the Gated DeltaNet layers that carry state across steps: the
// causal conv with its window and the gated delta rule. Both walk a
// sequence's tokens in order (the recurrent form, for prefill chunks as well
// as decode steps), which equals the CPU's chunked form to rounding.
//
// The delta rule in two forms, tested against the CPU backend:
//  - straightforward (issue 7): a warp per state column, its lanes on rows,
//    so a warp's state loads are 32 rows apart (one 4-byte word per 32-byte
//    sector);
//  - tiled: a block per (sequence, value head, 32 columns), its lanes on
//    columns, so each load of a state row is one 128-byte line; the block
//    keeps its tile in registers for all of the sequence's new tokens,
//    reading and writing the state once per call, with k and q staged in
//    shared memory. The chunked WY/UT prefill kernel is still to come.
#include <cmath>

#include "engine/backend/cuda/cuda_kernels.h"
#include "engine/backend/cuda/device_common.cuh"

namespace tributary {
namespace cuda {
namespace {

constexpr int kConvThreads = 128;
constexpr int kDeltaWarpsPerBlock = 4;
constexpr int kMaxKeysPerLane = static_cast<int>(kMaxDeltaKeyDim / kWarpSize);

// One thread per (sequence, channel): the window and the taps live in
// registers while the thread walks the sequence's new tokens.
__global__ void CausalConv1dSiluKernel(ConstTyped x, int64_t channels,
                                       int kernel, ConstTyped w,
                                       Typed window_pool, Typed out,
                                       DeviceLayout layout) {
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  const DeviceSequence seq = layout.sequences[blockIdx.y];
  const int history = kernel - 1;
  const int64_t window_base =
      static_cast<int64_t>(seq.state_slot) * history * channels;
  float window[kMaxConvKernel];  // oldest first
  float taps[kMaxConvKernel];
  // The current input's tap, apart: indexing taps[] with a run-time index
  // would put the array in local memory.
  const float last_tap = LoadF32(w.data, w.type, c * kernel + history);
#pragma unroll
  for (int j = 0; j < kMaxConvKernel; ++j) {
    window[j] = j < history ? LoadF32(window_pool.data, window_pool.type,
                                      window_base + j * channels + c)
                            : 0.0f;
    taps[j] = j < kernel ? LoadF32(w.data, w.type, c * kernel + j) : 0.0f;
  }
  for (int64_t t = 0; t < seq.num_tokens; ++t) {
    const int64_t index = (seq.token_offset + t) * channels + c;
    const float input = LoadF32(x.data, x.type, index);
    // Tap j multiplies the input at t − (kernel − 1) + j, in the reference's
    // order: the window oldest first, then the current input.
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxConvKernel; ++j) {
      if (j < history) sum += taps[j] * window[j];
    }
    sum += last_tap * input;
    StoreF32(out.data, out.type, index, SiluF32(sum));
#pragma unroll
    for (int j = 0; j + 1 < kMaxConvKernel; ++j) {
      if (j + 1 < history) window[j] = window[j + 1];
    }
#pragma unroll
    for (int j = 0; j < kMaxConvKernel; ++j) {
      if (j == history - 1) window[j] = input;
    }
  }
#pragma unroll
  for (int j = 0; j < kMaxConvKernel; ++j) {
    if (j < history) {
      StoreF32(window_pool.data, window_pool.type,
               window_base + j * channels + c, window[j]);
    }
  }
}

// One warp per (sequence, value head, state column m). Lane l holds rows
// l, l + 32, … of column m of the head's state S [dk, dv] in registers for
// the whole sequence: the state is read and written once per call. Per
// token (model-spec §4.5):
//   S ← e^g S;  δ = β (v − Sᵀk̂);  S ← S + k̂ δᵀ;  o = Sᵀ q̂
// and column m of that needs only column m of S.
__global__ void GatedDeltaRuleKernel(ConstTyped q, ConstTyped k, ConstTyped v,
                                     ConstTyped g, ConstTyped beta,
                                     int64_t key_heads, int64_t value_heads,
                                     int64_t key_dim, int64_t value_dim,
                                     float* state_pool, Typed out,
                                     DeviceLayout layout) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t m =
      blockIdx.x * int64_t{kDeltaWarpsPerBlock} + threadIdx.x / kWarpSize;
  if (m >= value_dim) return;  // whole warps leave together
  const int64_t j = blockIdx.y;
  const DeviceSequence seq = layout.sequences[blockIdx.z];
  const int64_t kh = j / (value_heads / key_heads);
  float* state =
      state_pool + (static_cast<int64_t>(seq.state_slot) * value_heads + j) *
                       key_dim * value_dim;
  float s[kMaxKeysPerLane];
#pragma unroll
  for (int r = 0; r < kMaxKeysPerLane; ++r) {
    const int64_t i = lane + int64_t{r} * kWarpSize;
    s[r] = i < key_dim ? state[i * value_dim + m] : 0.0f;
  }
  for (int64_t t = 0; t < seq.num_tokens; ++t) {
    const int64_t row = seq.token_offset + t;
    const float decay = expf(LoadF32(g.data, g.type, row * value_heads + j));
    const float b = LoadF32(beta.data, beta.type, row * value_heads + j);
    const int64_t key_base = (row * key_heads + kh) * key_dim;
    float kv[kMaxKeysPerLane], qv[kMaxKeysPerLane];
    float prediction = 0.0f;
#pragma unroll
    for (int r = 0; r < kMaxKeysPerLane; ++r) {
      const int64_t i = lane + int64_t{r} * kWarpSize;
      kv[r] = i < key_dim ? LoadF32(k.data, k.type, key_base + i) : 0.0f;
      qv[r] = i < key_dim ? LoadF32(q.data, q.type, key_base + i) : 0.0f;
      s[r] *= decay;
      prediction += s[r] * kv[r];
    }
    prediction = WarpSum(prediction);
    const int64_t value_index = (row * value_heads + j) * value_dim + m;
    const float delta = b * (LoadF32(v.data, v.type, value_index) - prediction);
    float output = 0.0f;
#pragma unroll
    for (int r = 0; r < kMaxKeysPerLane; ++r) {
      s[r] += kv[r] * delta;
      output += s[r] * qv[r];
    }
    output = WarpSum(output);
    if (lane == 0) StoreF32(out.data, out.type, value_index, output);
  }
#pragma unroll
  for (int r = 0; r < kMaxKeysPerLane; ++r) {
    const int64_t i = lane + int64_t{r} * kWarpSize;
    if (i < key_dim) state[i * value_dim + m] = s[r];
  }
}

// The tiled form. Thread (warp w, lane l) holds column m = tile · 32 + l of
// rows w, w + 8, w + 16, … of the head's state S [dk, dv]. Per token
// (model-spec §4.5), with each column's sums over rows reduced across the
// 8 warps through shared memory in a fixed order:
//   S ← e^g S;  δ = β (v − Sᵀk̂);  S ← S + k̂ δᵀ;  o = Sᵀ q̂.
constexpr int kTileColumns = kWarpSize;
constexpr int kTileWarps = 8;
constexpr int kTileRowsPerThread = static_cast<int>(kMaxDeltaKeyDim / kTileWarps);

__global__ void GatedDeltaRuleTiledKernel(ConstTyped q, ConstTyped k,
                                          ConstTyped v, ConstTyped g,
                                          ConstTyped beta, int64_t key_heads,
                                          int64_t value_heads, int64_t key_dim,
                                          int64_t value_dim, float* state_pool,
                                          Typed out, DeviceLayout layout) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int64_t m = blockIdx.x * int64_t{kTileColumns} + lane;
  const bool has_column = m < value_dim;
  const int64_t j = blockIdx.y;
  const DeviceSequence seq = layout.sequences[blockIdx.z];
  const int64_t kh = j / (value_heads / key_heads);
  float* state =
      state_pool + (static_cast<int64_t>(seq.state_slot) * value_heads + j) *
                       key_dim * value_dim;
  float s[kTileRowsPerThread];
#pragma unroll
  for (int r = 0; r < kTileRowsPerThread; ++r) {
    const int64_t i = warp + int64_t{r} * kTileWarps;
    s[r] = (has_column && i < key_dim) ? state[i * value_dim + m] : 0.0f;
  }
  // k̂ and q̂ of the token, double-buffered by token parity, and the two
  // per-warp partial sums: three barriers per token (see below).
  __shared__ float shared_k[2][kMaxDeltaKeyDim];
  __shared__ float shared_q[2][kMaxDeltaKeyDim];
  __shared__ float prediction_part[kTileWarps][kTileColumns];
  __shared__ float output_part[kTileWarps][kTileColumns];
  for (int64_t t = 0; t < seq.num_tokens; ++t) {
    const int buffer = static_cast<int>(t % 2);
    const int64_t row = seq.token_offset + t;
    const int64_t key_base = (row * key_heads + kh) * key_dim;
    for (int64_t i = threadIdx.x; i < key_dim; i += blockDim.x) {
      shared_k[buffer][i] = LoadF32(k.data, k.type, key_base + i);
      shared_q[buffer][i] = LoadF32(q.data, q.type, key_base + i);
    }
    const float decay = expf(LoadF32(g.data, g.type, row * value_heads + j));
    const float b = LoadF32(beta.data, beta.type, row * value_heads + j);
    const int64_t value_index = (row * value_heads + j) * value_dim + m;
    const float value = has_column ? LoadF32(v.data, v.type, value_index) : 0.0f;
    // (1) k̂, q̂ staged. The buffer written here was last read for the
    // token before the previous one, before its barrier (3), which every
    // thread has passed.
    __syncthreads();
    float prediction = 0.0f;
#pragma unroll
    for (int r = 0; r < kTileRowsPerThread; ++r) {
      const int64_t i = warp + int64_t{r} * kTileWarps;
      if (i < key_dim) {
        s[r] *= decay;
        prediction += s[r] * shared_k[buffer][i];
      }
    }
    prediction_part[warp][lane] = prediction;
    // (2) The partial predictions are in. Every thread has passed (3) of
    // the previous token, so none still reads last token's parts.
    __syncthreads();
    float column_prediction = 0.0f;
#pragma unroll
    for (int w = 0; w < kTileWarps; ++w) column_prediction += prediction_part[w][lane];
    const float delta = b * (value - column_prediction);
    float output = 0.0f;
#pragma unroll
    for (int r = 0; r < kTileRowsPerThread; ++r) {
      const int64_t i = warp + int64_t{r} * kTileWarps;
      if (i < key_dim) {
        s[r] += shared_k[buffer][i] * delta;
        output += s[r] * shared_q[buffer][i];
      }
    }
    output_part[warp][lane] = output;
    // (3) The partial outputs are in; warp 0 reads them before it reaches
    // (2) of the next token, which every writer of the next parts waits for.
    __syncthreads();
    if (warp == 0 && has_column) {
      float column_output = 0.0f;
#pragma unroll
      for (int w = 0; w < kTileWarps; ++w) column_output += output_part[w][lane];
      StoreF32(out.data, out.type, value_index, column_output);
    }
  }
#pragma unroll
  for (int r = 0; r < kTileRowsPerThread; ++r) {
    const int64_t i = warp + int64_t{r} * kTileWarps;
    if (has_column && i < key_dim) state[i * value_dim + m] = s[r];
  }
}

}  // namespace

void LaunchCausalConv1dSilu(ConstTyped x, int64_t channels, int64_t kernel,
                            ConstTyped w, Typed window_pool, Typed out,
                            const DeviceLayout& layout, cudaStream_t stream) {
  if (layout.num_sequences <= 0 || channels <= 0) return;
  const dim3 grid(static_cast<unsigned>((channels + kConvThreads - 1) / kConvThreads),
                  static_cast<unsigned>(layout.num_sequences));
  TRIBUTARY_LAUNCH(CausalConv1dSiluKernel, grid, kConvThreads, stream)(
      x, channels, static_cast<int>(kernel), w, window_pool, out, layout);
}

void LaunchGatedDeltaRule(ConstTyped q, ConstTyped k, ConstTyped v,
                          ConstTyped g, ConstTyped beta, int64_t key_heads,
                          int64_t value_heads, int64_t key_dim,
                          int64_t value_dim, float* state_pool, Typed out,
                          const DeviceLayout& layout, cudaStream_t stream) {
  if (layout.num_sequences <= 0 || value_heads <= 0 || value_dim <= 0) return;
  const dim3 grid(
      static_cast<unsigned>((value_dim + kDeltaWarpsPerBlock - 1) / kDeltaWarpsPerBlock),
      static_cast<unsigned>(value_heads),
      static_cast<unsigned>(layout.num_sequences));
  TRIBUTARY_LAUNCH(GatedDeltaRuleKernel, grid, kDeltaWarpsPerBlock * kWarpSize, stream)(
      q, k, v, g, beta, key_heads, value_heads, key_dim, value_dim, state_pool,
      out, layout);
}

void LaunchGatedDeltaRuleTiled(ConstTyped q, ConstTyped k, ConstTyped v,
                               ConstTyped g, ConstTyped beta, int64_t key_heads,
                               int64_t value_heads, int64_t key_dim,
                               int64_t value_dim, float* state_pool, Typed out,
                               const DeviceLayout& layout, cudaStream_t stream) {
  if (layout.num_sequences <= 0 || value_heads <= 0 || value_dim <= 0) return;
  const dim3 grid(
      static_cast<unsigned>((value_dim + kTileColumns - 1) / kTileColumns),
      static_cast<unsigned>(value_heads),
      static_cast<unsigned>(layout.num_sequences));
  TRIBUTARY_LAUNCH(GatedDeltaRuleTiledKernel, grid, kTileWarps * kWarpSize, stream)(
      q, k, v, g, beta, key_heads, value_heads, key_dim, value_dim, state_pool,
      out, layout);
}

}  // namespace cuda
}  // namespace tributary

// The kernels of the Gated DeltaNet layers that carry state across steps: the
// causal conv with its window and the gated delta rule. Both walk a
// sequence's tokens in order (the recurrent form, for prefill chunks as well
// as decode steps), which equals the CPU's chunked form to rounding.
//
// The delta rule in two forms, tested against the CPU backend:
//  - straightforward: a warp per state column, its lanes on rows, so a
//    warp's state loads are 32 rows apart (one 4-byte word per 32-byte
//    sector);
//  - fast: decode steps (one token after cached ones) by a tiled recurrent
//    kernel, a block per (sequence, value head, 32 columns), its lanes on
//    columns, so each load of a state row is one 128-byte line, the tile
//    in registers, read and written once; every other sequence by the
//    chunked (WY/UT) form over 64-token chunks: the intra-chunk products,
//    which need no state, for all chunks at once, then one pass per
//    sequence and 32 state columns over its chunks, each chunk a few small
//    dense products against the state tile in shared memory instead of 64
//    dependent token steps.
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
  BeginAfterPriorGrids();
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

// The conv's input at step index s of sequence `seq` in channel c: x's row
// for s ≥ 0, else the window's row history + s (from before the step).
__device__ __forceinline__ float ConvStepInput(ConstTyped x, Typed window_pool,
                                               const DeviceSequence& seq,
                                               int64_t window_base, int history,
                                               int64_t channels, int64_t c,
                                               int64_t s) {
  return s >= 0 ? LoadF32(x.data, x.type, (seq.token_offset + s) * channels + c)
                : LoadF32(window_pool.data, window_pool.type,
                          window_base + (history + s) * channels + c);
}

// The same conv with one thread per (token, channel), for steps with
// prefill chunks: a thread walking a chunk's thousands of tokens in order
// waits out a load's latency at every token (its store to `out` may alias
// the next load of x). Here every output is independent: its inputs come
// from x or, for a sequence's first kernel − 1 tokens, from the window as
// it was before the step (only read here), which ConvWindowUpdateKernel
// then replaces. The sum runs in the serial kernel's order. Grid (token,
// channel block).
__global__ void CausalConv1dSiluTokensKernel(ConstTyped x, int64_t channels,
                                             int kernel, ConstTyped w,
                                             Typed window_pool, Typed out,
                                             DeviceLayout layout) {
  BeginAfterPriorGrids();
  const int64_t c = blockIdx.y * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  const int64_t token = blockIdx.x;
  const DeviceSequence seq = layout.sequences[layout.token_sequence[token]];
  const int history = kernel - 1;
  const int64_t t = token - seq.token_offset;  // within the sequence's step
  const int64_t window_base =
      static_cast<int64_t>(seq.state_slot) * history * channels;
  float sum = 0.0f;
  for (int j = 0; j < history; ++j) {
    const float input = ConvStepInput(x, window_pool, seq, window_base, history,
                                      channels, c, t - history + j);
    sum += LoadF32(w.data, w.type, c * kernel + j) * input;
  }
  const int64_t index = token * channels + c;
  sum += LoadF32(w.data, w.type, c * kernel + history) *
         LoadF32(x.data, x.type, index);
  StoreF32(out.data, out.type, index, SiluF32(sum));
}

// After CausalConv1dSiluTokensKernel: each sequence's window becomes its
// last kernel − 1 inputs. Row r takes the input at n − history + r, from x
// or from the window's row n + r > r: ascending r works in place. Grid
// (channel block, sequence).
__global__ void ConvWindowUpdateKernel(ConstTyped x, int64_t channels,
                                       int kernel, Typed window_pool,
                                       DeviceLayout layout) {
  BeginAfterPriorGrids();
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (c >= channels) return;
  const DeviceSequence seq = layout.sequences[blockIdx.y];
  const int64_t n = seq.num_tokens;
  if (n == 0) return;
  const int history = kernel - 1;
  const int64_t window_base =
      static_cast<int64_t>(seq.state_slot) * history * channels;
  for (int r = 0; r < history; ++r) {
    const float input = ConvStepInput(x, window_pool, seq, window_base, history,
                                      channels, c, n - history + r);
    StoreF32(window_pool.data, window_pool.type, window_base + r * channels + c,
             input);
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
  BeginAfterPriorGrids();
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
// Rows of the state a thread holds: enough for kMaxDeltaKeyDim, and for
// the fused decode kernel a half-size instance for heads of up to 128 key
// dims (the 27B's): 56 registers instead of 108 (ptxas, sm_90), so 4 blocks
// share a multiprocessor instead of 2. A decode step is the state's read
// and write, and more blocks keep more of it in flight. The same sums in
// the same order either way.
constexpr int kTileRowsPerThread = static_cast<int>(kMaxDeltaKeyDim / kTileWarps);
constexpr int kTileRowsHalf = kTileRowsPerThread / 2;
// The fused decode kernel repeats L2NormRowsKernel's reduction: same threads.
static_assert(kTileWarps * kWarpSize == kRowThreads, "a tile block is a row block");

template <int kRows>
using TileRows = float[kRows];

// The tile instance for heads of key_dim dims.
inline bool TakesHalfTile(int64_t key_dim) { return key_dim <= kTileRowsHalf * kTileWarps; }

// Where a thread of the tiled grid (32-column tile, value head, sequence)
// works: its lane's column m of value head j, of key head kh.
struct TileThread {
  int lane, warp;
  int64_t m;
  bool has_column;
  int64_t j, kh;
  DeviceSequence seq;
  float* state;  // the head's state S [dk, dv] in the sequence's slot

  __device__ TileThread(int64_t key_heads, int64_t value_heads, int64_t key_dim,
                        int64_t value_dim, float* state_pool,
                        const DeviceLayout& layout)
      : lane(static_cast<int>(threadIdx.x % kWarpSize)),
        warp(static_cast<int>(threadIdx.x / kWarpSize)),
        m(blockIdx.x * int64_t{kTileColumns} + lane),
        has_column(m < value_dim),
        j(blockIdx.y),
        kh(j / (value_heads / key_heads)),
        seq(layout.sequences[blockIdx.z]),
        state(state_pool + (static_cast<int64_t>(seq.state_slot) * value_heads + j) *
                               key_dim * value_dim) {}
};
using TileParts = float[kTileWarps][kTileColumns];

// The thread's rows of the tile from the head's state (zeros off the edges).
template <int kRows>
__device__ __forceinline__ void LoadStateTile(const float* state, int64_t key_dim,
                                              int64_t value_dim, int64_t m,
                                              bool has_column, TileRows<kRows>& s) {
  const int warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = warp + int64_t{r} * kTileWarps;
    s[r] = (has_column && i < key_dim) ? state[i * value_dim + m] : 0.0f;
  }
}

template <int kRows>
__device__ __forceinline__ void StoreStateTile(float* state, int64_t key_dim,
                                               int64_t value_dim, int64_t m,
                                               bool has_column, const TileRows<kRows>& s) {
  const int warp = threadIdx.x / kWarpSize;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = warp + int64_t{r} * kTileWarps;
    if (has_column && i < key_dim) state[i * value_dim + m] = s[r];
  }
}

// One token of the tiled form, from barrier (1) on: k̂ and q̂ [dk] are staged
// in shared memory by the caller, which every thread has finished writing
// when it calls; `value` is v of the thread's column. Returns the column's
// output o in warp 0 (0 elsewhere). Three barriers: on return every thread
// has passed the last, so the caller may restage k̂, q̂ in a buffer that the
// token before this one used (the tiled kernel double-buffers them).
template <int kRows>
__device__ __forceinline__ float TiledDeltaToken(TileRows<kRows>& s, const float* k_hat,
                                                 const float* q_hat,
                                                 int64_t key_dim, float decay,
                                                 float b, float value,
                                                 TileParts& prediction_part,
                                                 TileParts& output_part) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  // (1) k̂, q̂ staged.
  __syncthreads();
  float prediction = 0.0f;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = warp + int64_t{r} * kTileWarps;
    // Explicit fmas here and below: the tiled and the fused kernel inline
    // this step in different code, and must contract it the same way.
    if (i < key_dim) {
      s[r] *= decay;
      prediction = __fmaf_rn(s[r], k_hat[i], prediction);
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
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = warp + int64_t{r} * kTileWarps;
    if (i < key_dim) {
      s[r] = __fmaf_rn(k_hat[i], delta, s[r]);
      output = __fmaf_rn(s[r], q_hat[i], output);
    }
  }
  output_part[warp][lane] = output;
  // (3) The partial outputs are in; warp 0 reads them before it reaches
  // (2) of the next token, which every writer of the next parts waits for.
  __syncthreads();
  float column_output = 0.0f;
  if (warp == 0) {
#pragma unroll
    for (int w = 0; w < kTileWarps; ++w) column_output += output_part[w][lane];
  }
  return column_output;
}

template <int kRows>
__global__ void GatedDeltaRuleTiledKernel(ConstTyped q, ConstTyped k,
                                          ConstTyped v, ConstTyped g,
                                          ConstTyped beta, int64_t key_heads,
                                          int64_t value_heads, int64_t key_dim,
                                          int64_t value_dim, float* state_pool,
                                          Typed out, DeviceLayout layout) {
  BeginAfterPriorGrids();
  const TileThread at(key_heads, value_heads, key_dim, value_dim, state_pool, layout);
  const DeviceSequence& seq = at.seq;
  if (seq.chunked) return;  // the whole block: the chunked kernels' sequence
  const int64_t j = at.j, m = at.m, kh = at.kh;
  const bool has_column = at.has_column;
  float* state = at.state;
  TileRows<kRows> s;
  LoadStateTile(state, key_dim, value_dim, m, has_column, s);
  // k̂ and q̂ of the token, double-buffered by token parity: the buffer
  // written for token t was last read for token t − 2, before the last
  // barrier of token t − 1, which every thread has passed.
  __shared__ float shared_k[2][kMaxDeltaKeyDim];
  __shared__ float shared_q[2][kMaxDeltaKeyDim];
  __shared__ TileParts prediction_part;
  __shared__ TileParts output_part;
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
    const float o = TiledDeltaToken(s, shared_k[buffer], shared_q[buffer],
                                    key_dim, decay, b, value, prediction_part,
                                    output_part);
    if (at.warp == 0 && has_column) StoreF32(out.data, out.type, value_index, o);
  }
  StoreStateTile(state, key_dim, value_dim, m, has_column, s);
}

// A decode step of a whole GDN layer's core in one kernel (Backend::
// GatedDeltaNet): the same grid and tile as the tiled kernel, for steps in
// which every sequence has one token after cached ones. Each block reads q
// and k of its key head and v of its columns straight from the conv output
// [T, 2·Hk·dk + Hv·dv], L2-normalises q and k, computes its head's gates,
// and runs the token. The split q, k, v and the gates are never stored, so
// seven launches become one. Every value is the op-by-op path's, bit for
// bit: the norms are L2NormRowsKernel's (RowSumOfSquares over the same 256
// threads, the normalised values rounded to the activation type), the gates
// GdnGatesKernel's. A decode then gives the same result whether its step
// runs this kernel or, beside a prefill, the op-by-op path: batch
// invariance.
template <int kRows>
__global__ void GatedDeltaNetDecodeKernel(ConstTyped conv_out, ConstTyped a,
                                          ConstTyped b, ConstTyped a_log,
                                          ConstTyped dt_bias, int64_t key_heads,
                                          int64_t value_heads, int64_t key_dim,
                                          int64_t value_dim, float q_scale,
                                          float* state_pool, Typed out,
                                          DeviceLayout layout) {
  BeginAfterPriorGrids();
  const TileThread at(key_heads, value_heads, key_dim, value_dim, state_pool, layout);
  // One token after cached ones (the backend checks the step has no other
  // kind); a sequence of no tokens leaves its state alone.
  if (at.seq.num_tokens != 1) return;  // the whole block
  const int64_t j = at.j, m = at.m, kh = at.kh;
  const bool has_column = at.has_column;
  float* state = at.state;
  const int64_t row = at.seq.token_offset;
  const int64_t key_columns = key_heads * key_dim;
  const int64_t conv_row = row * (2 * key_columns + value_heads * value_dim);
  TileRows<kRows> s;
  LoadStateTile(state, key_dim, value_dim, m, has_column, s);
  __shared__ float shared_q[kMaxDeltaKeyDim];
  __shared__ float shared_k[kMaxDeltaKeyDim];
  __shared__ float sum_scratch[kTileWarps];
  __shared__ TileParts prediction_part;
  __shared__ TileParts output_part;
  const int64_t q_base = conv_row + kh * key_dim;
  const int64_t k_base = conv_row + key_columns + kh * key_dim;
  const float q_factor =
      L2NormFactor(RowSumOfSquares(conv_out, q_base, key_dim, sum_scratch), q_scale);
  const float k_factor =
      L2NormFactor(RowSumOfSquares(conv_out, k_base, key_dim, sum_scratch), 1.0f);
  for (int64_t i = threadIdx.x; i < key_dim; i += blockDim.x) {
    shared_q[i] = RoundTo(conv_out.type,
                          LoadF32(conv_out.data, conv_out.type, q_base + i) * q_factor);
    shared_k[i] = RoundTo(conv_out.type,
                          LoadF32(conv_out.data, conv_out.type, k_base + i) * k_factor);
  }
  const float decay = expf(GdnLogDecay(
      LoadF32(a.data, a.type, row * value_heads + j) +
          LoadF32(dt_bias.data, dt_bias.type, j),
      LoadF32(a_log.data, a_log.type, j)));
  const float beta = SigmoidF32(LoadF32(b.data, b.type, row * value_heads + j));
  const float value =
      has_column ? LoadF32(conv_out.data, conv_out.type,
                           conv_row + 2 * key_columns + j * value_dim + m)
                 : 0.0f;
  // TiledDeltaToken's barrier (1) orders the staging before its reads.
  const float o = TiledDeltaToken(s, shared_k, shared_q, key_dim, decay, beta,
                                  value, prediction_part, output_part);
  if (at.warp == 0 && has_column) {
    StoreF32(out.data, out.type, (row * value_heads + j) * value_dim + m, o);
  }
  StoreStateTile(state, key_dim, value_dim, m, has_column, s);
}

// --- The chunked form -----------------------------------------------------------
// Per chunk of C tokens with cumulative log decays G_i (model-spec §4.6, the
// CPU's reference::GatedDeltaRuleChunked):
//   A_ij = β_i (k̂_i·k̂_j) e^{G_i − G_j} (j < i),  P_ij = (q̂_i·k̂_j) e^{G_i − G_j} (j ≤ i)
//   [U | W] = (I + A)⁻¹ [βV | β e^G K̂]
//   V_new = U − W S;  O = e^G ⊙ (Q̂ S) + P V_new;
//   S ← e^{G_last} S + (K̂ ⊙ e^{G_last − G})ᵀ V_new.
// A shorter last chunk is a chunk padded with zeros (β = 0, g = 0), which
// changes neither outputs nor state; the kernels skip the padded rows.
constexpr int kChunk = static_cast<int>(kDeltaChunk);
constexpr int kChunkThreads = 256;

// The per-chunk intermediates of one pass, slot = (chunked rank · chunks per
// pass + chunk in pass) · value heads + head.
struct ChunkWorkspace {
  float* u;      // [slots, C, dv]
  float* w;      // [slots, C, dk]
  float* p;      // [slots, C, C]
  float* decay;  // [slots, C]: G_i
};

// Grid (chunk in pass, value head, chunked sequence).
__global__ void DeltaChunkPrepareKernel(ConstTyped q, ConstTyped k,
                                        ConstTyped v, ConstTyped g,
                                        ConstTyped beta, int64_t key_heads,
                                        int64_t value_heads, int64_t key_dim,
                                        int64_t value_dim, int64_t first_chunk,
                                        int64_t chunks_per_pass,
                                        ChunkWorkspace ws, DeviceLayout layout) {
  BeginAfterPriorGrids();
  const DeviceSequence seq = layout.sequences[layout.chunked_sequences[blockIdx.z]];
  const int64_t start = (first_chunk + blockIdx.x) * int64_t{kChunk};
  if (start >= seq.num_tokens) return;  // the whole block
  const int n = seq.num_tokens - start < kChunk
                    ? static_cast<int>(seq.num_tokens - start)
                    : kChunk;
  const int64_t j = blockIdx.y;
  const int64_t kh = j / (value_heads / key_heads);
  const int64_t row0 = seq.token_offset + start;
  const int64_t slot =
      (int64_t{blockIdx.z} * chunks_per_pass + blockIdx.x) * value_heads + j;
  float* u = ws.u + slot * kChunk * value_dim;
  float* w = ws.w + slot * kChunk * key_dim;
  float* p = ws.p + slot * kChunk * kChunk;
  auto key_at = [&](int64_t i) { return ((row0 + i) * key_heads + kh) * key_dim; };

  __shared__ float cumulative[kChunk];
  __shared__ float b[kChunk];
  __shared__ float a[kChunk][kChunk + 1];  // +1: rows on different banks
  // The gates are loaded by a thread each, then summed in order by one
  // thread from shared memory (a serial walk over global loads would wait
  // on each in turn).
  if (threadIdx.x < kChunk) {
    const int i = threadIdx.x;
    cumulative[i] = i < n ? LoadF32(g.data, g.type, (row0 + i) * value_heads + j) : 0.0f;
    b[i] = i < n ? LoadF32(beta.data, beta.type, (row0 + i) * value_heads + j) : 0.0f;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float running = 0.0f;
    for (int i = 0; i < kChunk; ++i) {
      if (i < n) running += cumulative[i];
      cumulative[i] = running;
    }
  }
  __syncthreads();  // the sums are in
  // The pairs (i, jj ≤ i): k̂_i · k̂_jj and q̂_i · k̂_jj, each a sum over d
  // ascending. Thread x takes pairs x + 256·r: column jj = x % 64 and rows
  // x / 64 + 4r. The chunk's k̂ and q̂ rows pass through shared memory 32
  // dims at a time, read in rows by consecutive threads: a thread reading
  // its own row of global memory per d made each warp load touch 32 rows
  // 4 KB apart. The sums keep their order, so the bits are unchanged.
  static_assert(kChunkThreads % kChunk == 0 &&
                (kChunk * kChunk) % kChunkThreads == 0);
  constexpr int kPairsPerThread = kChunk * kChunk / kChunkThreads;
  constexpr int kRowStep = kChunkThreads / kChunk;
  constexpr int kSlice = 32;
  __shared__ float k_slice[kChunk][kSlice + 1];  // +1: columns on distinct banks
  __shared__ float q_slice[kChunk][kSlice + 1];
  const int jj = threadIdx.x % kChunk;
  const int i0 = threadIdx.x / kChunk;
  float kk[kPairsPerThread], qk[kPairsPerThread];
#pragma unroll
  for (int r = 0; r < kPairsPerThread; ++r) kk[r] = qk[r] = 0.0f;
  for (int64_t d0 = 0; d0 < key_dim; d0 += kSlice) {
    const int width = key_dim - d0 < kSlice ? static_cast<int>(key_dim - d0) : kSlice;
    __syncthreads();  // the previous slice is read
    for (int e = threadIdx.x; e < kChunk * kSlice; e += blockDim.x) {
      const int row = e / kSlice, dd = e % kSlice;
      const bool there = row < n && dd < width;
      k_slice[row][dd] = there ? LoadF32(k.data, k.type, key_at(row) + d0 + dd) : 0.0f;
      q_slice[row][dd] = there ? LoadF32(q.data, q.type, key_at(row) + d0 + dd) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kPairsPerThread; ++r) {
      const int i = i0 + r * kRowStep;
      if (i >= n || jj > i) continue;
      for (int dd = 0; dd < width; ++dd) {
        const float key_j = k_slice[jj][dd];
        kk[r] += k_slice[i][dd] * key_j;
        qk[r] += q_slice[i][dd] * key_j;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kPairsPerThread; ++r) {
    const int i = i0 + r * kRowStep;
    float a_value = 0.0f, p_value = 0.0f;
    if (i < n && jj <= i) {
      const float decay = expf(cumulative[i] - cumulative[jj]);
      if (jj < i) a_value = b[i] * kk[r] * decay;
      p_value = qk[r] * decay;
    }
    a[i][jj] = a_value;
    p[i * kChunk + jj] = p_value;
  }
  if (threadIdx.x < kChunk) ws.decay[slot * kChunk + threadIdx.x] = cumulative[threadIdx.x];
  __syncthreads();
  // The right-hand sides [βV | β e^G K̂] into U and W (rows < n), so that
  // the solve below reads plain floats (with the loads' type switch inside
  // the unrolled solve, it spilled).
  for (int64_t e = threadIdx.x; e < int64_t{n} * (value_dim + key_dim);
       e += blockDim.x) {
    const int64_t i = e / (value_dim + key_dim), c = e % (value_dim + key_dim);
    if (c < value_dim) {
      u[i * value_dim + c] =
          b[i] * LoadF32(v.data, v.type, ((row0 + i) * value_heads + j) * value_dim + c);
    } else {
      w[i * key_dim + (c - value_dim)] =
          b[i] * expf(cumulative[i]) *
          LoadF32(k.data, k.type, key_at(i) + (c - value_dim));
    }
  }
  __syncthreads();
  // Forward substitution in place, one column of [U | W] per thread, row by
  // row, each row's terms in ascending jj (the reference's order). The
  // solved rows are kept in registers; a row's result is put in place by
  // an unrolled select, since a run-time index would send the array to
  // local memory (and a fully unrolled triangle spilled).
  for (int64_t c = threadIdx.x; c < value_dim + key_dim; c += blockDim.x) {
    float* column = c < value_dim ? u + c : w + (c - value_dim);
    const int64_t stride = c < value_dim ? value_dim : key_dim;
    float solved[kChunk];
#pragma unroll
    for (int i = 0; i < kChunk; ++i) solved[i] = 0.0f;
    // Row i + 1 is loaded before row i is solved, so that the load's
    // latency overlaps the row's chain of multiply-adds.
    float next = n > 0 ? column[0] : 0.0f;
    for (int i = 0; i < n; ++i) {
      float x = next;
      if (i + 1 < n) next = column[(i + 1) * stride];
#pragma unroll
      for (int jj = 0; jj < kChunk; ++jj) {
        if (jj < i) x -= a[i][jj] * solved[jj];
      }
      column[i * stride] = x;
#pragma unroll
      for (int jj = 0; jj < kChunk; ++jj) {
        if (jj == i) solved[jj] = x;
      }
    }
  }
}

// Grid (16-column tile, value head, chunked sequence), kStateThreads
// threads. The state tile S [dk, 16] lives in shared memory for all the
// pass's chunks. Per chunk, three products, each by register tiles over
// operands staged in shared memory 32 dims at a time (a thread's 8 outputs
// take 2 shared loads per dim, where a global load per multiply-add, as
// the first form had, left the kernel waiting on loads):
//   (A) V_new = U − W S           [C, 16]: thread rows 4·rg …, columns 2·cg …
//   (B) O = e^G ⊙ (Q̂ S) + P V_new [C, 16]: the same outputs
//   (C) S ← e^{G_last} S + K̃ᵀ V_new [dk, 16], K̃ = K̂ ⊙ e^{G_last − G}:
//       per 32-dim slice, thread rows 2·rg …, columns 2·cg …
// Every sum keeps the reference's order (d ascending, then jj ascending;
// i ascending for the state), as the single-thread column would.
constexpr int kStateColumns = 16;
constexpr int kStateThreads = 128;
constexpr int kStateSlice = 32;                               // dims staged at once
constexpr int kColumnPairs = kStateColumns / 2;               // threads across columns
constexpr int kRowGroups = kStateThreads / kColumnPairs;      // 16
static_assert(kRowGroups * 4 == kChunk, "(A), (B): 4 chunk rows a thread");
static_assert(kRowGroups * 2 == kStateSlice, "(C): 2 slice dims a thread");
// Transposed operand slices [dim][row], padded so that a row group's 4 rows
// stay 16-byte aligned; the K̃ slice [row][dim] is stored in the same place.
constexpr int kSliceRowStride = kChunk + 4;
constexpr int kKeySliceStride = kStateSlice + 4;
constexpr int kSliceFloats = kStateSlice * kSliceRowStride > kChunk * kKeySliceStride
                                 ? kStateSlice * kSliceRowStride
                                 : kChunk * kKeySliceStride;

__global__ void __launch_bounds__(kStateThreads)
DeltaChunkStateKernel(ConstTyped q, ConstTyped k, int64_t key_heads,
                      int64_t value_heads, int64_t key_dim, int64_t value_dim,
                      float* state_pool, Typed out, int64_t first_chunk,
                      int64_t chunks_per_pass, ChunkWorkspace ws,
                      DeviceLayout layout) {
  BeginAfterPriorGrids();
  const int tid = threadIdx.x;
  const int rg = tid / kColumnPairs, cg = tid % kColumnPairs;
  const int64_t j = blockIdx.y;
  const DeviceSequence seq = layout.sequences[layout.chunked_sequences[blockIdx.z]];
  const int64_t kh = j / (value_heads / key_heads);
  const int64_t chunks = (seq.num_tokens + kChunk - 1) / kChunk;
  const int64_t last =
      first_chunk + chunks_per_pass < chunks ? first_chunk + chunks_per_pass : chunks;
  if (first_chunk >= last) return;  // the whole block
  const int64_t column0 = blockIdx.x * int64_t{kStateColumns};
  // This thread's two columns, and whether each is a real one.
  const int64_t m[2] = {column0 + 2 * cg, column0 + 2 * cg + 1};
  const bool has[2] = {m[0] < value_dim, m[1] < value_dim};
  float* state =
      state_pool + (static_cast<int64_t>(seq.state_slot) * value_heads + j) *
                       key_dim * value_dim;
  __shared__ float tile[kMaxDeltaKeyDim][kStateColumns];
  __shared__ float v_new[kChunk][kStateColumns];
  alignas(16) __shared__ float slice[kSliceFloats];
  alignas(16) __shared__ float p_t[kChunk][kSliceRowStride];  // Pᵀ [jj][i]
  __shared__ float e_decay[kChunk];    // e^{G_i}
  __shared__ float e_to_last[kChunk];  // e^{G_last − G_i}
  for (int64_t e = tid; e < key_dim * kStateColumns; e += kStateThreads) {
    const int64_t d = e / kStateColumns, c = e % kStateColumns;
    tile[d][c] = column0 + c < value_dim ? state[d * value_dim + column0 + c] : 0.0f;
  }
  // Accumulates `acc` [4 rows][2 columns] += Xᵀ-slice · S over the key
  // dims, X [C, dk] given by x_at(i, d) (0 for padded rows), staged 32 dims
  // at a time into `slice` as [dim][row].
  auto product_with_state = [&](auto x_at, float (&acc)[4][2]) {
    for (int64_t d0 = 0; d0 < key_dim; d0 += kStateSlice) {
      const int width = key_dim - d0 < kStateSlice ? static_cast<int>(key_dim - d0)
                                                   : kStateSlice;
      __syncthreads();  // the slice's last readers are done
      for (int e = tid; e < kChunk * kStateSlice; e += kStateThreads) {
        const int i = e / kStateSlice, dd = e % kStateSlice;
        slice[dd * kSliceRowStride + i] = dd < width ? x_at(i, d0 + dd) : 0.0f;
      }
      __syncthreads();
      for (int dd = 0; dd < width; ++dd) {
        const float* x4 = slice + dd * kSliceRowStride + 4 * rg;
        const float s0 = tile[d0 + dd][2 * cg], s1 = tile[d0 + dd][2 * cg + 1];
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          acc[r][0] = __fmaf_rn(x4[r], s0, acc[r][0]);
          acc[r][1] = __fmaf_rn(x4[r], s1, acc[r][1]);
        }
      }
    }
  };
  for (int64_t chunk = first_chunk; chunk < last; ++chunk) {
    const int64_t start = chunk * kChunk;
    const int n = seq.num_tokens - start < kChunk
                      ? static_cast<int>(seq.num_tokens - start)
                      : kChunk;
    const int64_t row0 = seq.token_offset + start;
    const int64_t slot =
        (int64_t{blockIdx.z} * chunks_per_pass + (chunk - first_chunk)) *
            value_heads + j;
    const float* u = ws.u + slot * kChunk * value_dim;
    const float* w = ws.w + slot * kChunk * key_dim;
    const float* p = ws.p + slot * kChunk * kChunk;
    const float* decay = ws.decay + slot * kChunk;
    // (0) Every thread is done with the last chunk's factors, Pᵀ and V_new
    // (and, at the first chunk, the tile is loaded).
    __syncthreads();
    if (tid < kChunk) {
      e_decay[tid] = expf(decay[tid]);
      e_to_last[tid] = expf(decay[n - 1] - decay[tid]);
    }
    for (int e = tid; e < kChunk * kChunk; e += kStateThreads) {
      const int i = e / kChunk, jj = e % kChunk;
      p_t[jj][i] = p[e];  // 0 above the diagonal and in padded rows
    }
    // (A) V_new = U − W S.
    float acc[4][2];
#pragma unroll
    for (int r = 0; r < 4; ++r) acc[r][0] = acc[r][1] = 0.0f;
    product_with_state(
        [&](int i, int64_t d) { return i < n ? w[i * key_dim + d] : 0.0f; }, acc);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int i = 4 * rg + r;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        v_new[i][2 * cg + c] =
            (i < n && has[c]) ? u[i * value_dim + m[c]] - acc[r][c] : 0.0f;
      }
    }
    // (B) Q̂ S (its first barrier also completes V_new and Pᵀ for below).
    float qs[4][2];
#pragma unroll
    for (int r = 0; r < 4; ++r) qs[r][0] = qs[r][1] = 0.0f;
    product_with_state(
        [&](int i, int64_t d) {
          return i < n ? LoadF32(q.data, q.type, ((row0 + i) * key_heads + kh) * key_dim + d)
                       : 0.0f;
        },
        qs);
    // O = e^G ⊙ Q̂S + P V_new, jj ascending up to each row's diagonal (the
    // group's loop runs to its last row's; the others skip the rest, as
    // 0 · an overflowed V_new would be NaN).
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      qs[r][0] *= e_decay[4 * rg + r];
      qs[r][1] *= e_decay[4 * rg + r];
    }
    const int jj_end = 4 * rg + 4 < n ? 4 * rg + 4 : n;
    for (int jj = 0; jj < jj_end; ++jj) {
      const float* p4 = &p_t[jj][4 * rg];
      const float v0 = v_new[jj][2 * cg], v1 = v_new[jj][2 * cg + 1];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        if (jj > 4 * rg + r) continue;
        qs[r][0] = __fmaf_rn(p4[r], v0, qs[r][0]);
        qs[r][1] = __fmaf_rn(p4[r], v1, qs[r][1]);
      }
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t i = 4 * rg + r;
      if (i >= n) continue;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        if (has[c]) {
          StoreF32(out.data, out.type, ((row0 + i) * value_heads + j) * value_dim + m[c],
                   qs[r][c]);
        }
      }
    }
    // (C) S ← e^{G_last} S + K̃ᵀ V_new, 32 dims of the state at a time.
    const float e_last = e_decay[n - 1];
    for (int64_t d0 = 0; d0 < key_dim; d0 += kStateSlice) {
      const int width = key_dim - d0 < kStateSlice ? static_cast<int>(key_dim - d0)
                                                   : kStateSlice;
      // Every read of the slice buffer, and of these state rows by (A) and
      // (B), is done.
      __syncthreads();
      for (int e = tid; e < kChunk * kStateSlice; e += kStateThreads) {
        const int i = e / kStateSlice, dd = e % kStateSlice;
        slice[i * kKeySliceStride + dd] =
            (i < n && dd < width)
                ? LoadF32(k.data, k.type, ((row0 + i) * key_heads + kh) * key_dim + d0 + dd) *
                      e_to_last[i]
                : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int dd = 2 * rg + r;
        if (dd >= width) continue;
        float s0 = e_last * tile[d0 + dd][2 * cg];
        float s1 = e_last * tile[d0 + dd][2 * cg + 1];
        for (int i = 0; i < n; ++i) {
          const float key = slice[i * kKeySliceStride + dd];
          s0 = __fmaf_rn(key, v_new[i][2 * cg], s0);
          s1 = __fmaf_rn(key, v_new[i][2 * cg + 1], s1);
        }
        tile[d0 + dd][2 * cg] = s0;
        tile[d0 + dd][2 * cg + 1] = s1;
      }
    }
  }
  __syncthreads();
  for (int64_t e = tid; e < key_dim * kStateColumns; e += kStateThreads) {
    const int64_t d = e / kStateColumns, c = e % kStateColumns;
    if (column0 + c < value_dim) state[d * value_dim + column0 + c] = tile[d][c];
  }
}

}  // namespace

void LaunchCausalConv1dSilu(ConstTyped x, int64_t channels, int64_t kernel,
                            ConstTyped w, Typed window_pool, Typed out,
                            const DeviceLayout& layout, cudaStream_t stream) {
  if (layout.num_sequences <= 0 || channels <= 0) return;
  const unsigned channel_blocks =
      static_cast<unsigned>((channels + kConvThreads - 1) / kConvThreads);
  if (layout.num_tokens <= 2 * int64_t{layout.num_sequences}) {
    // Decodes (and short chunks): a thread per (sequence, channel) walks
    // its few tokens with the window in registers, in one launch.
    const dim3 grid(channel_blocks, static_cast<unsigned>(layout.num_sequences));
    TRIBUTARY_LAUNCH(CausalConv1dSiluKernel, grid, kConvThreads, stream)(
        x, channels, static_cast<int>(kernel), w, window_pool, out, layout);
    return;
  }
  const dim3 grid(static_cast<unsigned>(layout.num_tokens), channel_blocks);
  TRIBUTARY_LAUNCH(CausalConv1dSiluTokensKernel, grid, kConvThreads, stream)(
      x, channels, static_cast<int>(kernel), w, window_pool, out, layout);
  const dim3 window_grid(channel_blocks,
                         static_cast<unsigned>(layout.num_sequences));
  TRIBUTARY_LAUNCH(ConvWindowUpdateKernel, window_grid, kConvThreads, stream)(
      x, channels, static_cast<int>(kernel), window_pool, layout);
}

void LaunchGatedDeltaRule(ConstTyped q, ConstTyped k, ConstTyped v,
                          ConstTyped g, ConstTyped beta, int64_t key_heads,
                          int64_t value_heads, int64_t key_dim,
                          int64_t value_dim, float* state_pool, Typed out,
                          bool tiled, const DeviceLayout& layout,
                          cudaStream_t stream) {
  if (layout.num_sequences <= 0 || value_heads <= 0 || value_dim <= 0) return;
  // Columns per block: one per warp, or a tile of 32 over 8 warps.
  const int64_t columns = tiled ? kTileColumns : kDeltaWarpsPerBlock;
  const dim3 grid(static_cast<unsigned>((value_dim + columns - 1) / columns),
                  static_cast<unsigned>(value_heads),
                  static_cast<unsigned>(layout.num_sequences));
  const int threads = (tiled ? kTileWarps : kDeltaWarpsPerBlock) * kWarpSize;
  // The full tile only: ptxas gives the tiled kernel more registers with
  // the half tile (101 against 90), as it unrolls differently.
  TRIBUTARY_LAUNCH(tiled ? GatedDeltaRuleTiledKernel<kTileRowsPerThread> : GatedDeltaRuleKernel,
                   grid, threads, stream)(q, k, v, g, beta, key_heads,
                                          value_heads, key_dim, value_dim,
                                          state_pool, out, layout);
}

void LaunchGatedDeltaNetDecode(ConstTyped conv_out, ConstTyped a, ConstTyped b,
                               ConstTyped a_log, ConstTyped dt_bias,
                               int64_t key_heads, int64_t value_heads,
                               int64_t key_dim, int64_t value_dim, float q_scale,
                               float* state_pool, Typed out,
                               const DeviceLayout& layout, cudaStream_t stream) {
  if (layout.num_sequences <= 0 || value_heads <= 0 || value_dim <= 0) return;
  const dim3 grid(static_cast<unsigned>((value_dim + kTileColumns - 1) / kTileColumns),
                  static_cast<unsigned>(value_heads),
                  static_cast<unsigned>(layout.num_sequences));
  auto* kernel = TakesHalfTile(key_dim) ? GatedDeltaNetDecodeKernel<kTileRowsHalf>
                                        : GatedDeltaNetDecodeKernel<kTileRowsPerThread>;
  TRIBUTARY_LAUNCH(kernel, grid, kTileWarps * kWarpSize, stream)(
      conv_out, a, b, a_log, dt_bias, key_heads, value_heads, key_dim,
      value_dim, q_scale, state_pool, out, layout);
}

void LaunchGatedDeltaRuleChunked(ConstTyped q, ConstTyped k, ConstTyped v,
                                 ConstTyped g, ConstTyped beta,
                                 int64_t key_heads, int64_t value_heads,
                                 int64_t key_dim, int64_t value_dim,
                                 float* state_pool, Typed out,
                                 int64_t first_chunk, int64_t chunks_per_pass,
                                 float* workspace, const DeviceLayout& layout,
                                 cudaStream_t stream) {
  if (layout.num_chunked <= 0 || value_heads <= 0 || value_dim <= 0) return;
  const int64_t slots = int64_t{layout.num_chunked} * chunks_per_pass * value_heads;
  ChunkWorkspace ws;
  ws.u = workspace;
  ws.w = ws.u + slots * kChunk * value_dim;
  ws.p = ws.w + slots * kChunk * key_dim;
  ws.decay = ws.p + slots * kChunk * kChunk;
  const dim3 prepare_grid(static_cast<unsigned>(chunks_per_pass),
                          static_cast<unsigned>(value_heads),
                          static_cast<unsigned>(layout.num_chunked));
  TRIBUTARY_LAUNCH(DeltaChunkPrepareKernel, prepare_grid, kChunkThreads, stream)(
      q, k, v, g, beta, key_heads, value_heads, key_dim, value_dim,
      first_chunk, chunks_per_pass, ws, layout);
  const dim3 state_grid(
      static_cast<unsigned>((value_dim + kStateColumns - 1) / kStateColumns),
      static_cast<unsigned>(value_heads),
      static_cast<unsigned>(layout.num_chunked));
  TRIBUTARY_LAUNCH(DeltaChunkStateKernel, state_grid, kStateThreads, stream)(
      q, k, key_heads, value_heads, key_dim, value_dim, state_pool, out,
      first_chunk, chunks_per_pass, ws, layout);
}

}  // namespace cuda
}  // namespace tributary

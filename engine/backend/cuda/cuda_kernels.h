// Host-side launchers of the CUDA kernels (elementwise_kernels.cu,
// attention_kernels.cu, delta_rule_kernels.cu). Each queues one kernel on
// `stream` and returns; launch errors are read by the caller with
// cudaGetLastError. Pointers are device memory; each tensor comes with its
// ElementType, and every kernel computes in f32 (design.md §7). The maths of
// each is the reference op of the same name (cpu/reference_ops.h).
#ifndef TRIBUTARY_ENGINE_BACKEND_CUDA_CUDA_KERNELS_H_
#define TRIBUTARY_ENGINE_BACKEND_CUDA_CUDA_KERNELS_H_

#include "engine/backend/cuda/cuda_api.h"

#include <cstdint>

#include "engine/backend/cuda/device_layout.h"
#include "engine/backend/element_type.h"
#include "engine/backend/token_choice.h"

namespace tributary {
namespace cuda {

// A device pointer with its element type.
struct Typed {
  void* data;
  ElementType type;
};
struct ConstTyped {
  const void* data;
  ElementType type;
};

// --- elementwise_kernels.cu --------------------------------------------------

// The PTX version the kernels run from (90 when built for Hopper; 0 when it
// cannot be read). BeginAfterPriorGrids waits only in code built for sm_90
// or later, so programmatic launch needs this ≥ 90.
int KernelPtxVersion();

// n elements of `src` converted into `dst` (weights to bf16 at import).
void LaunchConvert(ConstTyped src, Typed dst, int64_t n, cudaStream_t stream);

// n deterministic uniform values in [low, high) from (seed, index)
// (random_fill.h), rounded to value_type, then stored in dst's type.
void LaunchFillRandom(Typed dst, int64_t n, uint64_t seed, float low,
                      float high, ElementType value_type, cudaStream_t stream);

// out [T, hidden] = table rows ids [T].
void LaunchEmbeddingGather(const int32_t* ids, int64_t num_tokens,
                           ConstTyped table, int64_t hidden, Typed out,
                           cudaStream_t stream);

// Zero-centred RMSNorm of num_rows rows of dim: x · rsqrt(mean x² + eps) ·
// (1 + w). x and out may alias.
void LaunchRmsNorm(ConstTyped x, int64_t num_rows, int64_t dim, ConstTyped w,
                   float eps, Typed out, cudaStream_t stream);

// rmsnorm(o) · w · silu(z) per row of dim.
void LaunchGatedRmsNorm(ConstTyped o, ConstTyped z, int64_t num_rows,
                        int64_t dim, ConstTyped w, float eps, Typed out,
                        cudaStream_t stream);

// x ← x + u over [num_tokens, hidden]; stats (nullable) [T, 6] f32 as
// backend.h's ResidualStatsColumn, computed on the stored (rounded) sum.
void LaunchResidualAdd(Typed x, ConstTyped u, int64_t num_tokens,
                       int64_t hidden, float* stats, cudaStream_t stream);

// LaunchResidualAdd, then LaunchRmsNorm of the new x into `normed` (weights
// w [hidden]), in one block per token: the same bits as the two.
void LaunchResidualAddRmsNorm(Typed x, ConstTyped u, int64_t num_tokens,
                              int64_t hidden, float* stats, ConstTyped w,
                              float eps, Typed normed, cudaStream_t stream);

// out = silu(gate) ⊙ up over n elements (out may alias gate).
void LaunchSwiGlu(ConstTyped gate, ConstTyped up, int64_t n, Typed out,
                  cudaStream_t stream);

// o ← o ⊙ sigmoid(gate) over n elements.
void LaunchSigmoidGate(Typed o, ConstTyped gate, int64_t n,
                       cudaStream_t stream);

// Each row of dim: x ← x · scale / sqrt(Σx² + 1e-6).
void LaunchL2NormRows(Typed x, int64_t num_rows, int64_t dim, float scale,
                      cudaStream_t stream);

// Backend::ChooseTokens: per row of logits [num_rows, vocab] (f32), the
// token of choices[row] (token_choice.h) into ids, -1 for a row with a NaN
// or an infinity; a row with penalties penalized in place from its entries
// of `history` (may be null when none has); with `logprobs` (may be null),
// a row's TokenLogprobs when it asks. Any vocabulary below 2^31 (the draw's tiles grow past
// kMaxChooseTiles · 512 ids).
constexpr int64_t kMaxChooseTiles = 1024;
void LaunchChooseTokens(float* logits, int64_t num_rows, int64_t vocab,
                        const TokenChoice* choices, TokenHistoryEntry* history,
                        int32_t* ids, TokenLogprobs* logprobs,
                        cudaStream_t stream);

// g = −exp(a_log) · softplus(a + dt_bias), beta = sigmoid(b) over
// [num_tokens, num_heads].
void LaunchGdnGates(ConstTyped a, ConstTyped b, int64_t num_tokens,
                    int64_t num_heads, ConstTyped a_log, ConstTyped dt_bias,
                    Typed g, Typed beta, cudaStream_t stream);

// dst [rows, dst_cols] = src [rows, src_cols] columns [col_begin, +dst_cols).
void LaunchCopyColumns(ConstTyped src, int64_t rows, int64_t src_cols,
                       int64_t col_begin, Typed dst, int64_t dst_cols,
                       cudaStream_t stream);

// ids [num_rows] = per row of x [num_rows, dim] (f32) the lowest index of
// its largest value, or -1 when the row holds a NaN or an infinity.
void LaunchArgMaxRows(const float* x, int64_t num_rows, int64_t dim,
                      int32_t* ids, cudaStream_t stream);

// dst [num_rows, dim] = src rows `rows` [num_rows].
void LaunchGatherRows(ConstTyped src, const int32_t* rows, int64_t num_rows,
                      int64_t dim, Typed dst, cudaStream_t stream);

// x rows [0, num_rows) of dim += scale · v (v f32 [dim]); x points at the
// first row.
void LaunchAddScaledVector(Typed x, int64_t num_rows, int64_t dim,
                           const float* v, float scale, cudaStream_t stream);

// x rows ← x − (x · u) u, u f32 [dim] of unit norm.
void LaunchProjectOut(Typed x, int64_t num_rows, int64_t dim, const float* u,
                      cudaStream_t stream);

// --- gemv_kernels.cu ---------------------------------------------------------

// For each of `count` outputs (at most kGemvMaxOutputs), one launch in all:
// y [tokens, out] (y's type) = x [tokens, in] · wᵀ, w [out, in], x and w
// bf16, 1 ≤ tokens ≤ kGemvMaxTokens, in a multiple of 8, x and w 16-byte
// aligned: the decode step's products, streaming w at full width.
constexpr int64_t kGemvMaxTokens = 8;
constexpr int kGemvMaxOutputs = 4;
struct GemvOutput {
  const void* w;
  int64_t out;
  Typed y;
};
void LaunchGemv(const void* x, int64_t tokens, int64_t in,
                const GemvOutput* outputs, int count, cudaStream_t stream);
// The gated FFN's first half in one launch, same conditions: out [tokens,
// rows_out] = silu(x · w_gateᵀ) ⊙ (x · w_upᵀ), w_gate and w_up [rows_out,
// in], each product rounded to out's type first (LaunchGemv's outputs, then
// LaunchSwiGlu, bit for bit).
void LaunchGemvSwiGlu(const void* x, int64_t tokens, int64_t in,
                      const void* w_gate, const void* w_up, int64_t rows_out,
                      Typed out, cudaStream_t stream);

// --- attention_kernels.cu ----------------------------------------------------

// Partial NeoX RoPE in place on x [T, heads, head_dim], dims [0, rotary_dim),
// at layout.token_position.
void LaunchRope(Typed x, int64_t num_tokens, int64_t num_heads,
                int64_t head_dim, int64_t rotary_dim, float theta,
                const DeviceLayout& layout, cudaStream_t stream);

// The largest head dim of the attention kernels (16 values per lane).
constexpr int64_t kMaxAttentionHeadDim = 512;

// Backend::AttentionInputs in one kernel (a warp per token and head, head
// dims ≤ kMaxAttentionHeadDim): q_and_gate [T, H · 2d] split into q and
// gate [T, H, d], q and k [T, Hkv, d] RMS-normed and rotated (partial RoPE
// at each token's position), k and v [T, Hkv, d] written into the pools
// [blocks, block_size, Hkv, d].
void LaunchAttentionInputs(ConstTyped q_and_gate, ConstTyped k, ConstTyped v,
                           ConstTyped q_norm, ConstTyped k_norm, float eps,
                           int64_t num_tokens, int64_t num_heads,
                           int64_t kv_heads, int64_t head_dim,
                           int64_t rotary_dim, float theta, Typed q, Typed gate,
                           Typed k_pool, Typed v_pool, int64_t block_size,
                           const DeviceLayout& layout, cudaStream_t stream);

// k, v [T, kv_heads, head_dim] into the pools [blocks, block_size, kv_heads,
// head_dim] at each token's position.
void LaunchWriteKv(ConstTyped k, ConstTyped v, int64_t num_tokens,
                   int64_t kv_heads, int64_t head_dim, Typed k_pool,
                   Typed v_pool, int64_t block_size,
                   const DeviceLayout& layout, cudaStream_t stream);

// Causal attention of q [T, heads, head_dim] over each token's sequence's
// cached keys 0 … position; out [T, heads, head_dim]. head_dim ≤
// kMaxAttentionHeadDim.
void LaunchPagedAttention(ConstTyped q, int64_t num_tokens, int64_t num_heads,
                          int64_t kv_heads, int64_t head_dim, ConstTyped k_pool,
                          ConstTyped v_pool, int64_t block_size, float scale,
                          Typed out, const DeviceLayout& layout,
                          cudaStream_t stream);

// The split (flash-decoding) form of LaunchPagedAttention, for head_dim ≤
// kSplitAttentionMaxHeadDim; a block serves up to kSplitAttentionHeadsPerBlock
// query heads of one KV head. Its rows, num_rows of them, are every token
// of the step, or with skip_flash the layout's split_tokens (the tokens of
// sequences with `flash` unset; the flash kernel takes the others). A row's
// keys 0 … position are cut into runs of equal length, at most max_runs of
// them and none shorter than min_run_keys (SplitRunKeys in
// device_common.cuh). A row with more than one run leaves each run's
// partial softmax in partial_stats [R, heads, max_runs, 2] (max,
// denominator) and partial_out [R, heads, max_runs, head_dim] (f32,
// unnormalised), for LaunchMergeAttentionRuns to combine into `out`. The
// partial buffers may be null when max_runs is 1.
constexpr int64_t kSplitAttentionMaxHeadDim = 256;
constexpr int64_t kSplitAttentionHeadsPerBlock = 8;
// A split kernel's blocks per row and run (its grid's y): one per KV head
// and group of up to heads_per_block of that KV head's query heads.
inline int64_t SplitBlocksPerRow(int64_t num_heads, int64_t kv_heads,
                                 int64_t heads_per_block) {
  return kv_heads * ((num_heads / kv_heads + heads_per_block - 1) / heads_per_block);
}
void LaunchSplitAttention(ConstTyped q, int64_t num_rows, int64_t num_heads,
                          int64_t kv_heads, int64_t head_dim, ConstTyped k_pool,
                          ConstTyped v_pool, int64_t block_size, float scale,
                          int64_t min_run_keys, int64_t max_runs,
                          float* partial_stats, float* partial_out, Typed out,
                          bool skip_flash, const DeviceLayout& layout,
                          cudaStream_t stream);

// The same split attention on the tensor cores
// (split_attention_mma_kernels.cu): bf16 q, pools and out, head_dim a
// multiple of 16 up to kFlashMaxHeadDim; a block serves up to
// kSplitAttentionMmaHeadsPerBlock query heads of one KV head. Same rows,
// runs and partials as LaunchSplitAttention.
constexpr int64_t kSplitAttentionMmaHeadsPerBlock = 16;
void LaunchSplitAttentionMma(const void* q, int64_t num_rows, int64_t num_heads,
                             int64_t kv_heads, int64_t head_dim,
                             const void* k_pool, const void* v_pool,
                             int64_t block_size, float scale,
                             int64_t min_run_keys, int64_t max_runs,
                             float* partial_stats, float* partial_out, void* out,
                             bool skip_flash, const DeviceLayout& layout,
                             cudaStream_t stream);

// Combines the runs of every row with more than one (either split form's
// partials) into `out`, as the online softmax would have; rows of one run
// were written by the split kernel. Nothing when max_runs is 1.
void LaunchMergeAttentionRuns(int64_t num_rows, int64_t num_heads,
                              int64_t head_dim, int64_t min_run_keys,
                              int64_t max_runs, const float* partial_stats,
                              const float* partial_out, Typed out,
                              bool skip_flash, const DeviceLayout& layout,
                              cudaStream_t stream);

// The flash kernel (flash_attention_kernels.cu): causal attention of the
// sequences with `flash` set, from layout.flash_tiles (kFlashRows query
// tokens each), bf16 q, pools and out; head_dim a multiple of 16, at most
// kFlashMaxHeadDim. A sequence qualifies with kFlashMinTokens new tokens.
constexpr int64_t kFlashMaxHeadDim = 256;
constexpr int64_t kFlashTileTokens = 64;
constexpr int64_t kFlashMinTokens = 16;
void LaunchFlashAttention(const void* q, int64_t num_heads, int64_t kv_heads,
                          int64_t head_dim, const void* k_pool,
                          const void* v_pool, int64_t block_size, float scale,
                          void* out, const DeviceLayout& layout,
                          cudaStream_t stream);

// --- delta_rule_kernels.cu ---------------------------------------------------

// The causal depthwise conv + SiLU per sequence over x [T, channels], from
// and into each sequence's window in window_pool [slots, kernel − 1,
// channels]; w [channels, kernel]. kernel ≤ kMaxConvKernel. Steps of more
// than two tokens a sequence on average (prefill chunks) take a thread per
// (token, channel) and a second kernel for the windows; others a thread per
// (sequence, channel) walking its tokens. The sums are the same.
constexpr int64_t kMaxConvKernel = 16;
void LaunchCausalConv1dSilu(ConstTyped x, int64_t channels, int64_t kernel,
                            ConstTyped w, Typed window_pool, Typed out,
                            const DeviceLayout& layout, cudaStream_t stream);

// The gated delta rule per sequence (recurrent form, every token in order),
// state_pool [slots, Hv, dk, dv] f32. dk ≤ kMaxDeltaKeyDim. Straightforward:
// a warp per state column, every sequence. Tiled: a block per (sequence,
// value head, 32 state columns), each state row read as one line; it skips
// the sequences whose `chunked` is set (LaunchGatedDeltaRuleChunked's).
constexpr int64_t kMaxDeltaKeyDim = 256;
void LaunchGatedDeltaRule(ConstTyped q, ConstTyped k, ConstTyped v,
                          ConstTyped g, ConstTyped beta, int64_t key_heads,
                          int64_t value_heads, int64_t key_dim,
                          int64_t value_dim, float* state_pool, Typed out,
                          bool tiled, const DeviceLayout& layout,
                          cudaStream_t stream);

// A GDN layer's core for a step in which every sequence has one token after
// cached ones (layout.num_chunked == 0), in one kernel: q, k [Hk, dk] and
// v [Hv, dv] read from conv_out [T, 2·Hk·dk + Hv·dv], q and k L2-normalised
// (q scaled by q_scale), the gates from a, b [T, Hv], a_log, dt_bias [Hv],
// then the tiled recurrent step into out [T, Hv, dv] and state_pool.
void LaunchGatedDeltaNetDecode(ConstTyped conv_out, ConstTyped a, ConstTyped b,
                               ConstTyped a_log, ConstTyped dt_bias,
                               int64_t key_heads, int64_t value_heads,
                               int64_t key_dim, int64_t value_dim, float q_scale,
                               float* state_pool, Typed out,
                               const DeviceLayout& layout, cudaStream_t stream);

// The chunked (WY/UT) form for the sequences of layout.chunked_sequences,
// over chunks of kDeltaChunk tokens (model-spec §4.6), chunks
// [first_chunk, first_chunk + chunks_per_pass) of each such sequence: a
// first kernel computes every chunk's intermediates at once (they do not
// depend on the state), a second walks each sequence's chunks in order,
// carrying a tile of the state in shared memory. `workspace` holds
// num_chunked · chunks_per_pass · DeltaChunkWorkspaceFloats(…) floats.
constexpr int64_t kDeltaChunk = 64;
inline int64_t DeltaChunkWorkspaceFloats(int64_t value_heads, int64_t key_dim,
                                         int64_t value_dim) {
  // U [C, dv], W [C, dk], P [C, C] and the decay sums [C], per value head.
  return value_heads * kDeltaChunk * (value_dim + key_dim + kDeltaChunk + 1);
}
void LaunchGatedDeltaRuleChunked(ConstTyped q, ConstTyped k, ConstTyped v,
                                 ConstTyped g, ConstTyped beta,
                                 int64_t key_heads, int64_t value_heads,
                                 int64_t key_dim, int64_t value_dim,
                                 float* state_pool, Typed out,
                                 int64_t first_chunk, int64_t chunks_per_pass,
                                 float* workspace, const DeviceLayout& layout,
                                 cudaStream_t stream);

}  // namespace cuda
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CUDA_CUDA_KERNELS_H_

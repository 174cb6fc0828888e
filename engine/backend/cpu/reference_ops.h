// The readable reference of every model operation, on the CPU, in f32.
//
// These functions are the specification the fast CPU path and the CUDA
// backend are tested against (design.md §9: every fast kernel has a naive
// twin). They favour clarity over speed: plain loops, f32 (or f64 where a sum
// is long) accumulation, no threading. All pointers are host memory, row-major,
// with the shapes given in the comments; no function allocates its outputs.
// The maths follows ../shared/docs/model-spec.md (section numbers below).
#ifndef TRIBUTARY_ENGINE_BACKEND_CPU_REFERENCE_OPS_H_
#define TRIBUTARY_ENGINE_BACKEND_CPU_REFERENCE_OPS_H_

#include <cstdint>

#include "engine/backend/element_type.h"
#include "engine/backend/token_choice.h"

namespace tributary {
namespace reference {

// y[t, o] = Σ_i x[t, i] · w[o, i]   (a Linear layer, y = x Wᵀ).
// x: [num_tokens, in_features] f32; w: [out_features, in_features] of
// `w_type`; y: [num_tokens, out_features] f32.
void MatMul(const float* x, int64_t num_tokens, int64_t in_features,
            const void* w, ElementType w_type, int64_t out_features, float* y);

// out[t] = E[ids[t]]. table: [vocab, hidden] of `table_type`; out:
// [num_tokens, hidden] f32. Ids must be in range (checked by the caller).
void EmbeddingGather(const int32_t* ids, int64_t num_tokens, const void* table,
                     ElementType table_type, int64_t hidden, float* out);

// Zero-centred RMSNorm (§2.2a): out = x · rsqrt(mean(x²) + eps) · (1 + w),
// over the last dimension of each of `num_rows` rows. x and out may alias.
// x, out: [num_rows, dim] f32; w: [dim] of `w_type`.
void RmsNormZeroCentred(const float* x, int64_t num_rows, int64_t dim,
                        const void* w, ElementType w_type, float eps, float* out);

// Gated RMSNorm of the GDN output (§2.2b):
// out = (o · rsqrt(mean(o²) + eps)) · w · silu(z), per row of `dim`.
// The weight is applied as stored (not 1 + w). o, z, out: [num_rows, dim].
void GatedRmsNorm(const float* o, const float* z, int64_t num_rows, int64_t dim,
                  const void* w, ElementType w_type, float eps, float* out);

// Partial NeoX (rotate-half) RoPE (§3.4), in place. x: [num_tokens,
// num_heads, head_dim]; only dims [0, rotary_dim) of each head rotate.
// positions: [num_tokens]. inv_freq[i] = theta^(−2i/rotary_dim).
void PartialRopeNeox(float* x, int64_t num_tokens, int64_t num_heads,
                     int64_t head_dim, int64_t rotary_dim, const int32_t* positions,
                     float theta);

// The residual statistics of one sublayer for each token (design.md §4).
struct ResidualTokenStats {
  float stream_norm;   // ‖x‖ before the add
  float update_norm;   // ‖u‖
  float sum_norm;      // ‖x + u‖
  float max_abs;       // max |x + u|
  int32_t max_abs_dim; // its dimension index
  bool nonfinite;      // any NaN/Inf in u or x + u
};

// x ← x + u, and, when `stats` is not null, stats[t] for each token.
// x, u: [num_tokens, hidden] f32; stats: [num_tokens].
void ResidualAdd(float* x, const float* u, int64_t num_tokens, int64_t hidden,
                 ResidualTokenStats* stats);

// x[r] += scale · v for each of num_rows rows of `dim` (steering).
void AddScaledVector(float* x, int64_t num_rows, int64_t dim, const float* v,
                     float scale);

// x[r] ← x[r] − (x[r] · u) u for each of num_rows rows of `dim`; u has unit
// norm. The dot product is accumulated in double (directional ablation).
void ProjectOut(float* x, int64_t num_rows, int64_t dim, const float* u);

// out = silu(gate) ⊙ up, element-wise over n elements (§5).
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);

// o ← o ⊙ sigmoid(gate), element-wise over n elements (§3.7).
void SigmoidGate(float* o, const float* gate, int64_t n);

// The lowest index of the largest of x[0 … n), or -1 when x holds a NaN or
// an infinity (greedy decoding; the host sampler's Argmax and tie rule).
int32_t ArgMaxRow(const float* x, int64_t n);

// The token of `choice` (backend.h, TokenChoice) for the logits x[0 … n),
// or -1 when x holds a NaN or an infinity. The naive form of the rule: the
// whole row ranked by a full sort, O(n log n).
int32_t ChooseToken(const float* x, int64_t n, const TokenChoice& choice);

// `choice`'s penalties on x[0 … n) in place, from its entries of `history`
// (token_choice.h), the host sampler's arithmetic; each entry's raw_logit
// gets the logit before. Nothing when the choice has none.
void ApplyPenalties(float* x, const TokenChoice& choice, TokenHistoryEntry* history);

// The raw logprobs of x[0 … n) (finite) for `token` and the `num_top` most
// likely tokens (TokenLogprobs; num_top ≤ kMaxTopLogprobs): the host
// sampler's formulas in its order, the ranking by a full sort.
TokenLogprobs RowLogprobs(const float* x, int64_t n, int32_t token,
                          int32_t num_top);

// q ← q · rsqrt(Σq² + 1e-6) · scale over each row of `dim` (§4.4; the eps is
// on the sum, not the mean). x: [num_rows, dim], in place.
void L2NormRows(float* x, int64_t num_rows, int64_t dim, float scale);

// The GDN gates (§4.3) for each token and value head: the log decay
// g = −exp(A_log) · softplus(a + dt_bias) (softplus linear above 20, as
// PyTorch) and beta = sigmoid(b). a, b, g, beta: [num_tokens, num_heads];
// a_log, dt_bias: [num_heads] of their stored dtypes.
void GdnGates(const float* a, const float* b, int64_t num_tokens,
              int64_t num_heads, const void* a_log, ElementType a_log_type,
              const void* dt_bias, ElementType dt_bias_type, float* g, float* beta);

// Causal depthwise conv1d + SiLU over channels (§4.2), continuing from a
// conv window. x: [num_tokens, channels], the raw projection outputs;
// window: [kernel − 1, channels], the previous inputs, oldest first (zeros at
// the start of a sequence), updated in place to the last kernel − 1 inputs;
// w: [channels, kernel] of `w_type` (the checkpoint's [C, 1, K]);
// out: [num_tokens, channels].
void CausalConv1dSilu(const float* x, int64_t num_tokens, int64_t channels,
                      int64_t kernel, const void* w, ElementType w_type,
                      float* window, float* out);

// Shapes of one gated delta rule call for one sequence (§4.5, §4.6).
struct DeltaRuleDims {
  int64_t num_tokens;
  int64_t num_key_heads;    // q̂ and k̂ heads
  int64_t num_value_heads;  // v heads = number of states; a multiple of keys
  int64_t key_dim;          // dk
  int64_t value_dim;        // dv
};

// The recurrent form (§4.5), one token at a time. Value head j uses key head
// j / (num_value_heads / num_key_heads) (grouped, not tiled).
// q, k: [num_tokens, num_key_heads, key_dim], already L2-normalised (q also
// scaled by key_dim^−½); v: [num_tokens, num_value_heads, value_dim];
// g (log decay, ≤ 0), beta: [num_tokens, num_value_heads];
// state: [num_value_heads, key_dim, value_dim], the initial state, updated in
// place to the final state; out: [num_tokens, num_value_heads, value_dim].
void GatedDeltaRuleRecurrent(const DeltaRuleDims& dims, const float* q,
                             const float* k, const float* v, const float* g,
                             const float* beta, float* state, float* out);

// The chunked (UT/WY) form of the same recurrence (§4.6), over chunks of
// `chunk_size` tokens; same arguments and results as the recurrent form, to
// rounding.
void GatedDeltaRuleChunked(const DeltaRuleDims& dims, int64_t chunk_size,
                           const float* q, const float* k, const float* v,
                           const float* g, const float* beta, float* state,
                           float* out);

// Where one sequence's keys and values live in a paged KV cache of one layer.
// Pools: [num_blocks, block_size, num_kv_heads, head_dim] f32. Token position
// p is in physical block block_table[p / block_size], row p % block_size.
struct PagedKvView {
  const float* k_pool;
  const float* v_pool;
  const int32_t* block_table;
  int64_t block_size;
  int64_t num_kv_heads;
  int64_t head_dim;
};

// Writes k and v of `num_tokens` tokens at positions first_position, … into
// the sequence's blocks. k, v: [num_tokens, num_kv_heads, head_dim].
void WriteKv(const float* k, const float* v, int64_t num_tokens,
             int64_t first_position, const int32_t* block_table,
             int64_t block_size, int64_t num_kv_heads, int64_t head_dim,
             float* k_pool, float* v_pool);

// Causal softmax attention of `num_tokens` queries at positions
// first_position, … over the sequence's cached keys 0 … position (the new
// tokens' keys must already be written). GQA: query head h uses KV head
// h / (num_q_heads / num_kv_heads). q: [num_tokens, num_q_heads, head_dim];
// out: [num_tokens, num_q_heads, head_dim].
void PagedAttention(const float* q, int64_t num_tokens, int64_t num_q_heads,
                    int64_t first_position, const PagedKvView& kv, float scale,
                    float* out);

}  // namespace reference
}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_CPU_REFERENCE_OPS_H_

// The one narrow interface of model operations that every backend
// implements (CPU now, CUDA later). The model code (engine/model/) is written
// only against this interface, so a backend can be swapped without touching
// it.
//
// Contracts:
//  - Memory: tensors live in memory the backend owns (Allocate) or aliases
//    (ImportWeight on the CPU). Output tensors are views the caller
//    allocated; no op allocates its outputs.
//  - Asynchrony: ops may be queued and run later, in issue order (a CUDA
//    stream). Errors from queued ops are sticky and surface at the next
//    Synchronize() or CopyToHost(). The host must call Synchronize() (or
//    CopyToHost, which synchronises) before reading results. CopyFromHost
//    takes ordinary (pageable) host memory and has read it when it returns,
//    so the caller may reuse it at once (CUDA stages pageable memory before
//    the call returns; page-locked memory must not be passed).
//  - Threads: a backend is used by one thread at a time (the engine thread).
//  - Numerics: activations are f32 on the CPU (bf16 on CUDA) with f32
//    accumulation; recurrent state is always f32 (design.md §7).
//
// Shapes are given as [dims] with T = the step's number of tokens (rows), in
// the order of BatchLayout.
#ifndef TRIBUTARY_ENGINE_BACKEND_BACKEND_H_
#define TRIBUTARY_ENGINE_BACKEND_BACKEND_H_

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/backend/batch_layout.h"
#include "engine/backend/tensor.h"
#include "engine/backend/token_choice.h"

namespace tributary {

// Columns of the residual statistics tensor [T, kResidualStatsColumns]
// (design.md §4), one row per token, all f32.
enum ResidualStatsColumn : int64_t {
  kStatStreamNorm = 0,  // ‖x‖ before the add
  kStatUpdateNorm = 1,  // ‖u‖
  kStatSumNorm = 2,     // ‖x + u‖
  kStatMaxAbs = 3,      // max |x + u|
  kStatMaxAbsDim = 4,   // its dimension index (exact in f32 below 2^24)
  kStatNonFinite = 5,   // 1 if u or x + u holds a NaN or Inf, else 0
  kResidualStatsColumns = 6,
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const = 0;
  // The element type of activations (f32 on the CPU).
  virtual ElementType activation_type() const = 0;
  // The type ImportWeight keeps a weight stored as `stored` with `rank`
  // dimensions in (the CPU keeps every type; CUDA converts matrices to its
  // activation type). Weights made on the backend (synthetic models) are
  // allocated in it.
  virtual ElementType weight_type(ElementType stored, int rank) const = 0;

  // --- Memory ---------------------------------------------------------------
  // A tensor of `shape`, contents undefined, released by Free() or with the
  // backend. RESOURCE_EXHAUSTED when memory runs out.
  virtual absl::StatusOr<Tensor> Allocate(ElementType type,
                                          const Shape& shape) = 0;
  virtual void Free(Tensor& tensor) = 0;
  // A weight stored in host memory (e.g. an mmap'd checkpoint). The CPU
  // backend aliases it without copying (the host memory must outlive every
  // use); a device backend copies it (and may convert it to its own type),
  // and Free() releases the copy.
  virtual absl::StatusOr<Tensor> ImportWeight(const void* host, ElementType type,
                                              const Shape& shape) = 0;
  // The matmul weight `w` ([out, in], imported or allocated and filled) in
  // the layout this backend's MatMul reads fastest: a new tensor that is
  // valid only as MatMul's and MatMuls' w (its storage may be padded past
  // size_bytes()), released by Free() or with the backend; or `w` itself
  // when its layout already is that (the default). `w` stays valid and
  // unchanged either way (an embedding table tied to the LM head still
  // gathers rows), and the caller may Free it if nothing else reads it.
  // Called once per weight, at load. Pure virtual so that a wrapper cannot
  // forget to forward it: on an unprepared bf16 matrix the CPU's bf16
  // products pack it on every call (same bits, slowly), and its f32
  // products take the stored rows' 16-lane order (other bits, within
  // rounding, and slower).
  virtual absl::StatusOr<Tensor> PrepareMatMulWeight(const Tensor& w) = 0;
  // dst.size_bytes() bytes from host `src` into `dst`.
  virtual absl::Status CopyFromHost(const void* src, const Tensor& dst) = 0;
  // src.size_bytes() bytes of `src` to host `dst`, after every queued op.
  virtual absl::Status CopyToHost(const Tensor& src, void* dst) = 0;
  // Sets every element of a float tensor to zero (a fresh state slot).
  virtual void Zero(const Tensor& tensor) = 0;
  // Sets rows [row_begin, row_end) of the outermost dimension to zero.
  virtual void ZeroRows(const Tensor& tensor, int64_t row_begin,
                        int64_t row_end) = 0;
  // Copies rows [src_row, src_row + num_rows) of the outermost dimension
  // of `tensor` onto rows [dst_row, dst_row + num_rows) of the same tensor,
  // byte for byte, in issue order (a state slot or a KV block into another:
  // prefix-cache checkpoints and restores). Both ranges must lie inside the
  // tensor and must not overlap; CUDA records an error (reported at the
  // next Synchronize) and copies nothing otherwise, the CPU trusts the
  // caller (HybridDecoder validates). Not inside a graph region. Pure
  // virtual so that a wrapper cannot forget to forward it.
  virtual void CopyRows(const Tensor& tensor, int64_t src_row, int64_t dst_row,
                        int64_t num_rows) = 0;
  // Deterministic uniform values in [low, high) (random_fill.h): element i
  // of `tensor` (a float type) is RandomUniform(seed, i, low, high) rounded
  // to `value_type` (a float type), then stored in the tensor's type, the
  // same on every backend (synthetic weights: a bf16 model's values stay
  // bf16 values in a backend that keeps weights in f32).
  virtual void FillRandom(const Tensor& tensor, uint64_t seed, float low,
                          float high, ElementType value_type) = 0;
  // Waits for every queued op; returns the first error since the last call.
  virtual absl::Status Synchronize() = 0;

  // --- The step ---------------------------------------------------------------
  // The layout that the cache-reading ops of this step use. Validated by the
  // caller (the model) against its caches.
  virtual absl::Status SetBatchLayout(const BatchLayout& layout) = 0;

  // A graph region: the ops between BeginGraphRegion() and
  // EndGraphRegion() may be recorded and run as one unit (a CUDA graph),
  // which a later region with exactly the same ops and arguments replays
  // (decode steps of one batch size). Inside a region: no copies to or from
  // the host, no Synchronize, no Allocate or Free. The work is issued by
  // EndGraphRegion at the latest (its errors as for any op). A backend
  // without graphs runs the ops as usual and ignores both calls.
  virtual void BeginGraphRegion() {}
  virtual absl::Status EndGraphRegion() { return absl::OkStatus(); }

  // --- A step in parts ---------------------------------------------------------
  // How many parts the backend would run a step of `layout` in, at once, one
  // part per core (RunInParts): 1, the default, where one op at a time
  // already fills the device (a GPU). The model splits the step's sequences
  // into that many parts of contiguous rows as BatchLayout::PartBegins
  // cuts them (so the backend can judge the parts it would get); the model
  // may always run fewer. Every part's results are the bits the whole step would give
  // (batch invariance), so this only says what is faster.
  virtual int StepParts(const BatchLayout& /*layout*/) const { return 1; }
  // Runs body(p, part) for p in [0, parts), at once where the backend can,
  // each on a backend `part` of its own that shares this one's memory and
  // weights (any tensor of one is valid on the other) and keeps its own
  // batch layout (SetBatchLayout). Inside body only the step's ops and
  // SetBatchLayout: no Allocate, Free, PrepareMatMulWeight, copies or
  // graph regions. Returns when every part is done: the first non-OK status
  // of a part (by part order), else OK. The default runs the parts one after
  // another on this backend itself, in issue order, which is correct on any
  // backend; a backend that splits may refuse more parts than StepParts
  // gives.
  virtual absl::Status RunInParts(
      int parts, absl::FunctionRef<absl::Status(int part, Backend& backend)> body) {
    absl::Status first;
    for (int p = 0; p < parts; ++p) {
      absl::Status s = body(p, *this);
      if (first.ok()) first = s;
    }
    return first;
  }

  // --- Row-wise ops -------------------------------------------------------------
  // y [T, out] = x [T, in] · wᵀ, w [out, in] in its stored type or as
  // PrepareMatMulWeight returned it.
  virtual void MatMul(const Tensor& x, const Tensor& w, const Tensor& y) = 0;
  // Several products of one input (a layer's input projections): y_i =
  // x · w_iᵀ for each target, in one pass where the backend can; the same
  // results as the MatMul calls.
  struct MatMulTarget {
    const Tensor* w;
    const Tensor* y;
  };
  virtual void MatMuls(const Tensor& x, absl::Span<const MatMulTarget> targets) {
    for (const MatMulTarget& t : targets) MatMul(x, *t.w, *t.y);
  }
  // out [T, hidden] = table [vocab, hidden] rows of ids [T] (i32, in range).
  virtual void EmbeddingGather(const Tensor& ids, const Tensor& table,
                               const Tensor& out) = 0;
  // Zero-centred RMSNorm over each row of w.num_elements() values:
  // out = x · rsqrt(mean(x²) + eps) · (1 + w). x and out may alias.
  virtual void RmsNorm(const Tensor& x, const Tensor& w, float eps,
                       const Tensor& out) = 0;
  // out = rmsnorm(o) · w · silu(z) over rows of w.num_elements() values.
  virtual void GatedRmsNorm(const Tensor& o, const Tensor& z, const Tensor& w,
                            float eps, const Tensor& out) = 0;
  // x ← x + u; when `stats` has data, stats [T, kResidualStatsColumns].
  virtual void ResidualAdd(const Tensor& x, const Tensor& u,
                           const Tensor& stats) = 0;
  // ResidualAdd(x, u, stats), then RmsNorm(x, w, eps, normed): the end of a
  // sublayer and the next one's input norm, in one pass over x where the
  // backend fuses them. The same results as the two calls, bit for bit.
  virtual void ResidualAddRmsNorm(const Tensor& x, const Tensor& u,
                                  const Tensor& stats, const Tensor& w,
                                  float eps, const Tensor& normed) {
    ResidualAdd(x, u, stats);
    RmsNorm(x, w, eps, normed);
  }
  // out = silu(gate) ⊙ up (out may alias gate).
  virtual void SwiGlu(const Tensor& gate, const Tensor& up,
                      const Tensor& out) = 0;
  // The gated FFN's first half: out [T, I] = silu(x · w_gateᵀ) ⊙ (x ·
  // w_upᵀ), with gate and up [T, I] as scratch (out may alias gate). The
  // same results as MatMuls then SwiGlu, bit for bit, in one pass where the
  // backend fuses them.
  virtual void GateUpSwiGlu(const Tensor& x, const Tensor& w_gate,
                            const Tensor& w_up, const Tensor& gate,
                            const Tensor& up, const Tensor& out) {
    MatMuls(x, {{&w_gate, &gate}, {&w_up, &up}});
    SwiGlu(gate, up, out);
  }
  // o ← o ⊙ sigmoid(gate).
  virtual void SigmoidGate(const Tensor& o, const Tensor& gate) = 0;
  // Each row of `dim` values: x ← x · rsqrt(Σx² + 1e-6) · scale.
  virtual void L2NormRows(const Tensor& x, int64_t dim, float scale) = 0;
  // g = −exp(a_log) · softplus(a + dt_bias), beta = sigmoid(b); [T, Hv].
  virtual void GdnGates(const Tensor& a, const Tensor& b, const Tensor& a_log,
                        const Tensor& dt_bias, const Tensor& g,
                        const Tensor& beta) = 0;
  // Copies columns [col_begin, col_begin + dst.cols()) of each row of src
  // into the same row of dst (splitting a fused projection).
  virtual void CopyColumns(const Tensor& src, int64_t col_begin,
                           const Tensor& dst) = 0;
  // dst [R, d] = the rows `rows` [R] (i32) of src [T, d].
  virtual void GatherRows(const Tensor& src, const Tensor& rows,
                          const Tensor& dst) = 0;
  // ids [R] (i32) = for each row of x [R, V] (f32), the lowest index of its
  // largest value (greedy decoding's choice, as the host sampler makes it),
  // or -1 when the row holds a NaN or an infinity.
  virtual void ArgMaxRows(const Tensor& x, const Tensor& ids) = 0;
  // ids [R] (i32) = for each row of x [R, V] (f32), the token of its
  // TokenChoice (choices [R, kTokenChoiceWords] i32, the structs' bytes), or
  // -1 when the row holds a NaN or an infinity: sampling on the device, so
  // that only the ids come back. A row with penalties reads its entries of
  // `history` ([E, kTokenHistoryWords] i32, TokenHistoryEntry; may be empty
  // when no row has penalties), and its row of x is penalized in place.
  // Rows' history ranges must not overlap: a backend writes a row's scratch
  // into its entries (TokenHistoryEntry::raw_logit).
  // When `logprobs` has data ([R, kTokenLogprobsWords] i32), a row with
  // num_logprobs ≥ 0 and a token gets its TokenLogprobs there (of the raw
  // row; other rows' entries are left as they were).
  virtual void ChooseTokens(const Tensor& x, const Tensor& choices,
                            const Tensor& history, const Tensor& ids,
                            const Tensor& logprobs) = 0;

  // --- Interventions on the residual stream (per-request steering) ----------
  // x [T, d] rows [row_begin, row_end) += scale · v (v [d], f32).
  virtual void AddScaledVector(const Tensor& x, int64_t row_begin,
                               int64_t row_end, const Tensor& v,
                               float scale) = 0;
  // x [T, d] rows [row_begin, row_end) ← x − (x · u) u, u [d] f32 of unit norm:
  // the component along u removed (directional ablation).
  virtual void ProjectOut(const Tensor& x, int64_t row_begin, int64_t row_end,
                          const Tensor& u) = 0;

  // --- Ops that use the batch layout -----------------------------------------
  // Partial NeoX RoPE in place on x [T, heads, head_dim], dims
  // [0, rotary_dim), at each token's position.
  virtual void Rope(const Tensor& x, int64_t rotary_dim, float theta) = 0;
  // Causal depthwise conv + SiLU: out [T, C] from x [T, C] and each
  // sequence's conv window in window_pool [slots, kernel − 1, C] (updated),
  // w [C, kernel].
  virtual void CausalConv1dSilu(const Tensor& x, const Tensor& w,
                                const Tensor& window_pool,
                                const Tensor& out) = 0;
  // The gated delta rule per sequence, from and into its state in
  // state_pool [slots, Hv, dk, dv] (f32): q, k [T, Hk, dk] normalised,
  // v [T, Hv, dv], g, beta [T, Hv], out [T, Hv, dv]. Each sequence takes
  // the recurrent or the chunked form as the backend finds faster for its
  // token count and head shape (both agree to rounding; transformers takes
  // the chunked form for any prompt). The choice depends on the sequence
  // alone, never on the rest of the batch.
  virtual void GatedDeltaRule(const Tensor& q, const Tensor& k,
                              const Tensor& v, const Tensor& g,
                              const Tensor& beta, const Tensor& state_pool,
                              const Tensor& out) = 0;
  // The buffers GatedDeltaNet's default composition goes through.
  struct GdnScratch {
    Tensor q, k;     // [T, Hk, dk]
    Tensor v;        // [T, Hv, dv]
    Tensor g, beta;  // [T, Hv], f32
  };
  // A Gated DeltaNet layer's core after its conv (model-spec §4.3–4.4):
  // conv_out [T, 2·Hk·dk + Hv·dv] split into q, k and v (the shapes of
  // scratch.q and scratch.v), q and k L2-normalised per head (q also
  // scaled by 1/√dk), the gates from a, b [T, Hv] (GdnGates), then the delta
  // rule from and into state_pool into out [T, Hv, dv]. By default the ops
  // one by one through `scratch`; a backend that fuses them (CUDA decode
  // steps: one kernel instead of seven) may leave `scratch` untouched, and
  // must give the default's results bit for bit: it may fuse only some
  // steps, and a sequence's result must not depend on the others in its
  // step (batch invariance).
  virtual void GatedDeltaNet(const Tensor& conv_out, const Tensor& a,
                             const Tensor& b, const Tensor& a_log,
                             const Tensor& dt_bias, const GdnScratch& scratch,
                             const Tensor& state_pool, const Tensor& out) {
    const int64_t tokens = scratch.q.shape[0];
    const int64_t key_dim = scratch.q.shape[1] * scratch.q.shape[2];
    const int64_t head_dim = scratch.q.shape[2];
    // CopyColumns splits [T, columns] rows: 2-d views of the 3-d buffers.
    auto flat = [tokens](Tensor t) {
      t.shape = Shape{tokens, t.num_elements() / tokens};
      return t;
    };
    CopyColumns(conv_out, 0, flat(scratch.q));
    CopyColumns(conv_out, key_dim, flat(scratch.k));
    CopyColumns(conv_out, 2 * key_dim, flat(scratch.v));
    L2NormRows(scratch.q, head_dim, GdnQueryScale(head_dim));
    L2NormRows(scratch.k, head_dim, 1.0f);
    GdnGates(a, b, a_log, dt_bias, scratch.g, scratch.beta);
    GatedDeltaRule(scratch.q, scratch.k, scratch.v, scratch.g, scratch.beta,
                   state_pool, out);
  }
  // The scale of the normalised queries: 1/√dk (model-spec §4.4).
  static float GdnQueryScale(int64_t key_head_dim) {
    return 1.0f / std::sqrt(static_cast<float>(key_head_dim));
  }
  // Writes k, v [T, Hkv, head_dim] at each token's position into the pools
  // [blocks, block_size, Hkv, head_dim].
  virtual void WriteKv(const Tensor& k, const Tensor& v, const Tensor& k_pool,
                       const Tensor& v_pool) = 0;
  // A gated attention layer's inputs after its projections (model-spec
  // §3): q_and_gate [T, H · 2d], per head d query rows then d gate rows,
  // split into q and gate [T, H, d]; q and k [T, Hkv, d] RMS-normed
  // (zero-centred, q_norm and k_norm [d]); partial RoPE over rotary_dim
  // dims on both at each token's position; k and v [T, Hkv, d] written at
  // those positions into the pools. k may be overwritten. By default the ops
  // one by one; a backend that fuses them (CUDA: one kernel instead of
  // seven) keeps the intermediates in f32, so its results may differ from
  // the default's by their rounding.
  virtual void AttentionInputs(const Tensor& q_and_gate, const Tensor& k,
                               const Tensor& v, const Tensor& q_norm,
                               const Tensor& k_norm, float eps,
                               int64_t rotary_dim, float theta,
                               const Tensor& q, const Tensor& gate,
                               const Tensor& k_pool, const Tensor& v_pool) {
    const int64_t rows = q.shape[0] * q.shape[1], head_dim = q.shape[2];
    // CopyColumns splits rows: per-head 2-d views.
    auto per_head = [rows](Tensor t) {
      t.shape = Shape{rows, t.num_elements() / rows};
      return t;
    };
    CopyColumns(per_head(q_and_gate), 0, per_head(q));
    CopyColumns(per_head(q_and_gate), head_dim, per_head(gate));
    RmsNorm(q, q_norm, eps, q);
    RmsNorm(k, k_norm, eps, k);
    Rope(q, rotary_dim, theta);
    Rope(k, rotary_dim, theta);
    WriteKv(k, v, k_pool, v_pool);
  }
  // Causal attention of q [T, H, head_dim] over each sequence's cached keys
  // (GQA: head h reads KV head h / (H / Hkv)); out [T, H, head_dim].
  virtual void PagedAttention(const Tensor& q, const Tensor& k_pool,
                              const Tensor& v_pool, float scale,
                              const Tensor& out) = 0;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_BACKEND_BACKEND_H_

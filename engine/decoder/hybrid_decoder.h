// The hybrid decoder (model-spec.md §2–§5) as calls on a Backend: one forward
// runs a batch of sequences, each with some new tokens (a prefill chunk or
// one decode token), on paged KV storage (attention layers) and GDN state
// slots (linear-attention layers), and computes the residual statistics of
// every sublayer (design.md §4) inside the forward, fused with the residual
// adds, unless they are switched off.
//
// The caches have a fixed capacity (CacheConfig). Which blocks and slots a
// sequence gets is the scheduler's business: the decoder only checks that a
// step's layout stays inside the capacity.
//
// Thread safety: one thread at a time (the engine thread). A step in parts
// (Backend::RunInParts) runs its parts on the backend's threads, each on its
// own rows; Forward returns when all are done.
#ifndef TRIBUTARY_ENGINE_DECODER_HYBRID_DECODER_H_
#define TRIBUTARY_ENGINE_DECODER_HYBRID_DECODER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/backend/backend.h"
#include "engine/decoder/buffer_arena.h"
#include "engine/decoder/forward_options.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/decoder/step_runner.h"

namespace tributary {

struct CacheConfig {
  int64_t num_kv_blocks = 0;   // blocks in each attention layer's pool
  int64_t kv_block_size = 16;  // tokens per block
  int64_t num_state_slots = 0; // sequences that can hold GDN state at once
  // Extra rows of every GDN layer's window and state pools after the live
  // slots, for prefix-cache checkpoints (docs/prefix-cache.md §5, §7):
  // checkpoint slot s is pool row num_state_slots + s. A step never runs on
  // them (CheckLayout refuses a slot ≥ num_state_slots); only
  // CopyStateSlot reads and writes them. 0 (the default) allocates none.
  int64_t num_checkpoint_slots = 0;

  // The rows of each state pool: live slots, then checkpoint slots.
  int64_t num_state_rows() const {
    return num_state_slots + num_checkpoint_slots;
  }

  absl::Status Validate() const;
};

// How the decoder gets its weights onto the backend.
struct WeightLoadOptions {
  // Random weights (a synthetic model): every tensor is allocated on the
  // backend and filled there (Backend::FillRandom) from this seed, with a
  // range by role that keeps the activations of a deep stack in scale; the
  // views' data is not read (SyntheticModelWeights has none). The same seed
  // gives the same weights on every backend.
  std::optional<uint64_t> random_seed;
  // Called after each tensor with the bytes placed so far and in all (the
  // views' sizes), e.g. for a progress line while a device backend uploads.
  std::function<void(int64_t done_bytes, int64_t total_bytes)> progress;

  // A `progress` that logs a line (LogInfo) at every tenth of the weights.
  static std::function<void(int64_t, int64_t)> LogEveryTenth();
};

class HybridDecoder {
 public:
  // Imports the weights into `backend` (aliased on the CPU) and allocates the
  // caches. `config`, `weights` (and the memory they view) and `backend` must
  // outlive the decoder.
  static absl::StatusOr<std::unique_ptr<HybridDecoder>> Create(
      const ModelConfig& config, const ModelWeights& weights, Backend* backend,
      const CacheConfig& cache_config, const WeightLoadOptions& load = {});
  ~HybridDecoder();

  HybridDecoder(const HybridDecoder&) = delete;
  HybridDecoder& operator=(const HybridDecoder&) = delete;

  // Zeroes a state slot's conv windows and recurrent states in every GDN
  // layer; call before a new sequence uses the slot.
  absl::Status ResetStateSlot(int32_t slot);

  // The copies of prefix caching (docs/prefix-cache.md §7), queued on the
  // backend in issue order like any op (Backend::CopyRows), so a step
  // issued after them reads what they wrote. Not inside a graph region:
  // the engine issues them between steps.
  // CopyStateSlot: every GDN layer's conv window and recurrent state of
  // pool row `src_row` onto pool row `dst_row` (a live slot or a
  // checkpoint row, num_state_slots + s; distinct, both below
  // num_state_rows()): a checkpoint is a copy out of a live slot, a
  // restore a copy back into one.
  // CopyKvBlock: every attention layer's K and V block `src` onto block
  // `dst` (distinct, both below num_kv_blocks), all kv_block_size rows:
  // the tail of a partial block, which the copy's owner then extends.
  // INVALID_ARGUMENT (and nothing queued) out of range or when equal.
  absl::Status CopyStateSlot(int64_t src_row, int64_t dst_row);
  absl::Status CopyKvBlock(int32_t src, int32_t dst);

  // Runs one step. `ids` are the step's new tokens in layout order. The
  // layout is checked first (contiguous rows covering ids, slots and blocks
  // in range, block tables covering the positions, distinct state slots,
  // ids in the vocabulary); on error nothing has changed.
  absl::StatusOr<ForwardOutput> Forward(const BatchLayout& layout,
                                        absl::Span<const int32_t> ids,
                                        const ForwardOptions& options);

  // Host copies of cache rows, for tests and audits (not the serving path:
  // each synchronises the backend). ReadStateRow: for every GDN layer in
  // layer order, its conv window row, then its recurrent state row, of
  // state pool row `row` (below num_state_rows()), in the pools' own types. ReadKvBlock: for every
  // attention layer in layer order, its K block, then its V block
  // ([kv_block_size, Hkv, head_dim] each). INVALID_ARGUMENT out of range.
  absl::StatusOr<std::vector<std::vector<uint8_t>>> ReadStateRow(
      int64_t row) const;
  absl::StatusOr<std::vector<std::vector<uint8_t>>> ReadKvBlock(
      int32_t block) const;

  const ModelConfig& config() const { return *config_; }
  const CacheConfig& cache_config() const { return cache_config_; }

 private:
  struct AttentionLayer;
  struct LinearLayer;
  struct Layer;

  HybridDecoder(const ModelConfig& config, Backend* backend,
                const CacheConfig& cache_config);
  // What a weight is for: it sets the range of random values.
  enum class WeightRole {
    kMatrix,           // a projection [out, in]: ±√(3 / in), unit gain
    kEmbedding,        // token embeddings: ±1
    kZeroCentredNorm,  // 1 + w norms: w in ±0.1
    kPlainNorm,        // the GDN gated norm (w as is): [0.9, 1.1]
    kConv,             // the depthwise conv [C, K]: ±√(3 / K)
    kALog,             // A_log: [0, ln 16] (A in [1, 16], as Mamba's init)
    kDtBias,           // dt_bias: [−6, −2] (softplus → dt ≈ 0.0025 … 0.13)
  };
  absl::Status ImportWeights(const ModelWeights& weights,
                             const WeightLoadOptions& load);
  absl::Status AllocateCaches();
  absl::Status CheckLayout(const BatchLayout& layout,
                           absl::Span<const int32_t> ids) const;
  absl::StatusOr<Tensor> Import(const TensorView& view, const Shape& shape,
                                WeightRole role);

  // The model's forward of one step or part (StepRunner::RunModel): the
  // embedding, every layer, and the logits (or device choices) of io's
  // rows, on step.backend. `iv` only for a step in one piece.
  absl::Status RunStep(StepActivations& step, const StepIo& io,
                       const StepInterventions* iv, ForwardOutput* output);
  // The residual statistics of `sublayer` for the step's (or part's) rows:
  // [num_tokens, columns]; empty when they are off.
  static Tensor SublayerStats(const StepActivations& step, int64_t sublayer);
  void RunLinearAttention(const Layer& layer, StepActivations& step);
  void RunAttention(const Layer& layer, StepActivations& step);
  void RunMlp(const Layer& layer, StepActivations& step);
  // The interventions at one point (-1 = after the embedding, else after
  // sublayer s). Lens reads append to `lens`.
  absl::Status ApplyInterventions(const StepInterventions& iv, int sublayer,
                                  StepActivations& step, ForwardOutput* output);
  // The captures at one point into output->captured.
  absl::Status Capture(const StepInterventions& iv, int sublayer,
                       StepActivations& step, ForwardOutput* output);
  // Logits of `rows` of the stream (final norm, lm_head) into a host buffer
  // [rows, vocab].
  absl::Status StreamLogits(StepActivations& step,
                            const std::vector<int64_t>& rows,
                            std::vector<float>* logits);
  // A host vector on the backend, uploaded once per step.
  absl::StatusOr<Tensor> Upload(const std::vector<float>* v);

  const ModelConfig* config_;
  Backend* backend_;
  CacheConfig cache_config_;
  Tensor embed_tokens_;
  Tensor final_norm_;
  Tensor lm_head_;
  std::vector<Layer> layers_;
  std::vector<Tensor> owned_;  // every tensor to Free() at destruction
  // While ImportWeights runs: the random seed (if any), the progress
  // callback, and the bytes placed so far of how many.
  WeightLoadOptions load_;
  int64_t loaded_bytes_ = 0, total_weight_bytes_ = 0;
  // Runs each step: its buffers, its parts, the copies to and from the host.
  StepRunner runner_;
  // Buffers of the interventions (vectors, lens rows and logits), kept apart
  // from the step's so that steps without interventions never touch them;
  // and the host vectors uploaded this step.
  BufferArena intervention_buffers_;
  std::unordered_map<const std::vector<float>*, Tensor> uploaded_vectors_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_DECODER_HYBRID_DECODER_H_

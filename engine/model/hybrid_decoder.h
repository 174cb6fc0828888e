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
#ifndef TRIBUTARY_ENGINE_MODEL_HYBRID_DECODER_H_
#define TRIBUTARY_ENGINE_MODEL_HYBRID_DECODER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/backend/backend.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/model/stream_interventions.h"

namespace tributary {

struct CacheConfig {
  int64_t num_kv_blocks = 0;   // blocks in each attention layer's pool
  int64_t kv_block_size = 16;  // tokens per block
  int64_t num_state_slots = 0; // sequences that can hold GDN state at once

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

struct ForwardOptions {
  // Compute the per-token residual statistics of every sublayer.
  bool residual_stats = true;
  // Logits for every new token (the dump); otherwise only for the last new
  // token of each sequence.
  bool logits_for_all_tokens = false;
  // Interventions on the residual stream (stream_interventions.h); null or
  // empty: none. Not owned; must live until Forward returns.
  const StepInterventions* interventions = nullptr;
  // Empty, or one flag per logit row (per sequence unless
  // logits_for_all_tokens): a set row gets only the token the backend
  // chooses for it (ForwardOutput::device_ids), not its logits: its argmax,
  // or the token its entry of token_choices draws. For greedy and device
  // sampling, and for rows nobody samples from: a device then copies back
  // 4 bytes instead of a vocabulary's row.
  std::vector<bool> device_choice{};
  // Empty (every device_choice row takes its argmax), or one entry per logit
  // row: how the backend chooses the token of a device_choice row, and
  // whether it also returns the row's raw logprobs (Backend::ChooseTokens;
  // ignored for the other rows).
  std::vector<TokenChoice> token_choices{};
  // The history entries that token_choices with penalties point into
  // (TokenChoice::history_begin, history_count), every id in the
  // vocabulary.
  std::vector<TokenHistoryEntry> token_history{};
};

struct ForwardOutput {
  // Step rows (token indexes in the batch) that have logits, in order.
  std::vector<int64_t> logit_rows;
  // [rows without device_choice, vocab_size], raw f32, in logit row order
  // (all logit rows when device_choice is empty).
  std::vector<float> logits;
  // With device_choice: [logit_rows.size()], every row's token chosen by
  // the backend (the argmax: the lowest index of the largest logit; or the
  // token_choices draw); -1 when the row holds a NaN or an infinity. Empty
  // otherwise.
  std::vector<int32_t> device_ids;
  // With token_choices of which a row asks for logprobs: [logit_rows.size()],
  // those rows' raw logprobs (other entries unspecified). Empty otherwise.
  std::vector<TokenLogprobs> device_logprobs;
  // [2 · num_layers, num_tokens, kResidualStatsColumns] (backend.h): layer l's
  // mixer is entry 2l, its ffn 2l + 1. Empty when switched off.
  std::vector<float> residual_stats;
  // ‖x‖ of the stream entering the final norm, [num_tokens]; empty when the
  // residual statistics are off.
  std::vector<float> final_stream_norm;
  // [StepInterventions::lens.size(), vocab_size] raw f32: one row of
  // logits per lens read, in its order.
  std::vector<float> lens_logits;
  // One [hidden] f32 row per StepInterventions::captures entry, in order.
  std::vector<std::vector<float>> captured;
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

  // Runs one step. `ids` are the step's new tokens in layout order. The
  // layout is checked first (contiguous rows covering ids, slots and blocks
  // in range, block tables covering the positions, distinct state slots,
  // ids in the vocabulary); on error nothing has changed.
  absl::StatusOr<ForwardOutput> Forward(const BatchLayout& layout,
                                        absl::Span<const int32_t> ids,
                                        const ForwardOptions& options);

  const ModelConfig& config() const { return *config_; }
  const CacheConfig& cache_config() const { return cache_config_; }

 private:
  struct AttentionLayer;
  struct LinearLayer;
  struct Layer;
  struct Step;
  struct StepIo;

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

  // The embedding, every layer, and the logits (or device choices) of the
  // logit rows: the whole forward of `step` (its backend's batch layout
  // set), on step.backend. `iv` only for a step in one piece.
  absl::Status RunStep(Step& step, const StepIo& io,
                       const ForwardOptions& options,
                       const StepInterventions* iv, ForwardOutput* output);
  // The residual statistics of `sublayer` for the step's (or part's) rows:
  // [num_tokens, columns]; empty when they are off.
  static Tensor SublayerStats(const Step& step, int64_t sublayer);
  void RunLinearAttention(const Layer& layer, Step& step);
  void RunAttention(const Layer& layer, Step& step);
  void RunMlp(const Layer& layer, Step& step);
  // The interventions at one point (-1 = after the embedding, else after
  // sublayer s). Lens reads append to `lens`.
  absl::Status ApplyInterventions(const StepInterventions& iv, int sublayer,
                                  Step& step, ForwardOutput* output);
  // The captures at one point into output->captured.
  absl::Status Capture(const StepInterventions& iv, int sublayer, Step& step,
                       ForwardOutput* output);
  // Logits of `rows` of the stream (final norm, lm_head) into a host buffer
  // [rows, vocab].
  absl::Status StreamLogits(Step& step, const std::vector<int64_t>& rows,
                            std::vector<float>* logits);
  // The step's next buffer of intervention_workspace_, and a host vector
  // uploaded once per step.
  absl::StatusOr<Tensor> InterventionBuffer(Step& step, ElementType type,
                                            const Shape& shape);
  absl::StatusOr<Tensor> Upload(Step& step, const std::vector<float>* v);

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
  // Step activations, reused across steps (grown when a step needs more).
  std::vector<Tensor> workspace_;
  // Buffers of the interventions (vectors, lens rows and logits), kept apart
  // so that steps without interventions never touch them.
  std::vector<Tensor> intervention_workspace_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_MODEL_HYBRID_DECODER_H_

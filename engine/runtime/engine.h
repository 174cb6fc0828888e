// The engine: continuous batching of many requests on one HybridDecoder
// (design.md §2). One engine thread runs the step loop
//   inbox (new requests, cancellations) -> Scheduler::Schedule -> reset fresh
//   state slots -> HybridDecoder::Forward -> sample the sequences that sample
//   -> StreamDecoder + StopMatcher -> events to sinks -> Scheduler::Update
// and sleeps on a condition variable when there is no work.
//
// Thread safety: Submit, Cancel, Shutdown and the accessors may be called
// from any thread at any time. Sinks and the observer are called on the
// engine thread.
#ifndef TRIBUTARY_ENGINE_RUNTIME_ENGINE_H_
#define TRIBUTARY_ENGINE_RUNTIME_ENGINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/backend/backend_options.h"
#include "engine/decoder/forward_work.h"
#include "engine/runtime/request.h"
#include "engine/scheduler/scheduler_config.h"

namespace tributary {

class ModelDirectory;
class Tokenizer;

// Statistics of one step, for metrics.
struct StepStats {
  int64_t num_sequences = 0;             // in the batch
  int64_t num_tokens = 0;                // new tokens in the batch
  int64_t num_sampled = 0;               // sequences that sampled a token
  // Query-key pairs the attention layers scored (Σ over new tokens of
  // their position + 1) and Σ over sequences of the tokens cached after the
  // step: with the counts above, the step's shape for ForwardWork.
  int64_t attended_keys = 0;
  int64_t context_tokens = 0;
  int64_t num_preempted = 0;             // preempted by this step's Schedule()
  int64_t num_waiting = 0;               // after the step
  double kv_block_usage = 0.0;           // after the step, in [0, 1]
  double state_slot_usage = 0.0;         // after the step, in [0, 1]
  double step_seconds = 0.0;             // Schedule() to Update() done
  double forward_seconds = 0.0;          // inside HybridDecoder::Forward
  double outside_forward_seconds = 0.0;  // step_seconds - forward_seconds
};

// Called on the engine thread; must not block.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void OnStep(const StepStats& stats) = 0;
  // Every step's residual statistics (only when EngineOptions::
  // residual_stats is on), right after the forward: the model's health,
  // over the tokens of the requests that do not change the stream.
  // `num_intervened_tokens` counts the step's tokens of requests that steer,
  // ablate or skip layers, which are left out (a client must not be able to
  // move the model-health series or fire their alerts); their statistics
  // are in those requests' own trace and summary.
  virtual void OnResidualStats(const ResidualSummary& step,
                               int64_t num_intervened_tokens) {
    (void)step;
    (void)num_intervened_tokens;
  }
};

struct EngineOptions {
  // The model: an already loaded directory (not owned; must outlive the
  // engine), else `model_dir` is loaded and owned by the engine.
  const ModelDirectory* model = nullptr;
  std::string model_dir;
  // Instead of a directory: a synthetic model of this preset
  // (synthetic_model.h: "qwen3.5-27b", …, "tiny"), random weights made on the
  // backend from synthetic_seed. It has no tokenizer and no stop tokens:
  // prompts are token ids, and generation stops on length.
  std::string synthetic_model;
  uint64_t synthetic_seed = 1;
  // Optional tokenizer (not owned; must outlive the engine). When null and
  // load_tokenizer is set, tokenizer.json is loaded from the model directory.
  // Without one, prompts are token ids only and text deltas are empty.
  const Tokenizer* tokenizer = nullptr;
  bool load_tokenizer = false;
  // Where the model runs and the options of each backend
  // (backend_options.h): the CPU (the default) or a CUDA device.
  BackendOptions backend;
  // Where requests that sample, ask logprobs or have penalties get their
  // tokens: on the backend (Backend::ChooseTokens: only the ids and the
  // asked logprobs come back; penalties from each request's distinct
  // history ids, uploaded every step) or from the host sampler on the
  // copied logits row. Both follow one rule and give
  // the same tokens (up to sums in another order on a device). kAuto: on
  // the backend for CUDA, on the host for the CPU (whose logits are host
  // memory already, and whose ChooseTokens is the naive full sort).
  enum class DeviceSampling { kAuto, kOn, kOff };
  DeviceSampling device_sampling = DeviceSampling::kAuto;
  // Cores the engine thread may run on (sched_setaffinity); empty = any.
  // With backend.cpu.num_threads = 1 that is all of the engine's compute: a server can
  // keep it apart from its RPC threads.
  std::vector<int> engine_cpus;
  // Step budgets, queue bound and context limit. When num_kv_blocks and
  // num_state_slots are both 0, the pools are sized from
  // cache_memory_budget_bytes (DeriveCacheCapacity). max_sequence_tokens is
  // capped by the model's max_position_embeddings.
  SchedulerConfig scheduler;
  int64_t cache_memory_budget_bytes = 0;
  // Cap of the default max_new_tokens (a request without one gets the room
  // left in the context, at most this).
  int32_t max_new_tokens_limit = 4096;
  // Residual-stream statistics inside the forward (design.md §4).
  bool residual_stats = true;
  // Seeds the generator of per-request seeds for unseeded requests; nullopt
  // = std::random_device.
  std::optional<uint64_t> seed_generator_seed;
  // Optional (not owned; must outlive the engine).
  EngineObserver* observer = nullptr;
  // Fault injection for tests: called on the engine thread before every
  // forward; an error replaces the forward's result. A forward error fails
  // the step's requests with INTERNAL; UNAVAILABLE (what a backend returns
  // when it cannot run anymore, e.g. a sticky device error) fails the
  // engine: every request ends UNAVAILABLE, counts().failed turns true.
  std::function<absl::Status()> fault_hook;

  // INVALID_ARGUMENT naming the field.
  absl::Status Validate() const;
};

class Engine {
 public:
  // Loads what `options` asks, sizes and allocates the caches (the capacity is
  // logged), and starts the engine thread.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      const EngineOptions& options);
  // Shutdown(absl::InfinitePast()): cancels what remains and joins.
  ~Engine();

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates `request` (INVALID_ARGUMENT naming the field: prompt ids in the
  // vocabulary, a non-empty prompt, sampling parameters, stop token ids,
  // prompt + max_new_tokens within the context), then queues it and returns
  // its id. RESOURCE_EXHAUSTED when the waiting queue is full; UNAVAILABLE
  // after Shutdown or when the engine failed. On success `sink` gets exactly
  // one final event; on error it gets nothing. Never blocks on the step.
  absl::StatusOr<uint64_t> Submit(GenerateRequest request,
                                  std::shared_ptr<TokenSink> sink);

  // Cancels a request at any point: its sink gets a final event with
  // FinishReason::kCancelled (at the next step boundary) unless it finished
  // already; its blocks and slot are freed. Unknown or finished ids are
  // ignored. Never blocks on the step.
  void Cancel(uint64_t id);

  // Stops accepting requests, lets the work in flight run until `deadline`,
  // then cancels what remains and joins the engine thread. Idempotent;
  // concurrent calls all return after the join. Must not be called from a
  // sink or the observer.
  void Shutdown(absl::Time deadline);

  // The cache capacity (for GetModelInfo).
  struct Capacity {
    int64_t num_kv_blocks = 0;
    int64_t kv_block_size = 0;
    int64_t num_state_slots = 0;
    int64_t max_sequence_tokens = 0;  // the context limit of one request
    int64_t kv_block_bytes = 0;       // one block in every attention layer
    int64_t state_slot_bytes = 0;     // one slot in every GDN layer
  };
  const Capacity& capacity() const { return capacity_; }

  // The backend the model runs on ("cpu", "cuda": Backend::name()), for
  // build_info and GetModelInfo.
  const char* backend_name() const;

  // What a step of this model must do at the least (FLOPs and bytes, for a
  // benchmark's roofline; the cache sizes above come from it).
  const ForwardWork& forward_work() const { return forward_work_; }

  // A snapshot published by the engine thread when it takes new work, when
  // a step is scheduled and after every step (for tests and metrics).
  struct Counts {
    int64_t num_active = 0;  // accepted, without a final event yet
    int64_t num_waiting = 0;
    int64_t num_running = 0;
    int64_t num_sequences = 0;  // known to the scheduler
    int64_t num_free_kv_blocks = 0;
    int64_t num_free_state_slots = 0;
    int64_t num_steps = 0;
    int64_t num_preemptions = 0;
    // The engine hit a fatal error: every request failed with UNAVAILABLE
    // and no new one is accepted (the process should restart).
    bool failed = false;
  };
  Counts counts() const;

 private:
  struct Impl;
  explicit Engine(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
  Capacity capacity_;
  ForwardWork forward_work_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_RUNTIME_ENGINE_H_

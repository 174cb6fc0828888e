#include "engine/runtime/engine.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "engine/backend/backend_factory.h"
#include "engine/backend/element_type.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "engine/runtime/engine_impl.h"
#include "engine/decoder/hybrid_decoder.h"
#include "engine/model/model_directory.h"
#include "engine/sampling/sampler.h"
#include "engine/sampling/stop_matcher.h"
#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/stream_decoder.h"
#include "engine/tokenizer/tokenizer.h"

namespace tributary {

using engine_internal::RequestState;

absl::Status EngineOptions::Validate() const {
  for (int cpu : engine_cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(absl::StrCat(
          "engine_cpus: core ", cpu, " is outside [0, ", CPU_SETSIZE, ")"));
    }
  }
  if (model == nullptr && model_dir.empty() && synthetic_model.empty()) {
    return absl::InvalidArgumentError(
        "model: none of a loaded model, model_dir and synthetic_model is set");
  }
  if (!synthetic_model.empty() && (model != nullptr || !model_dir.empty())) {
    return absl::InvalidArgumentError(
        "synthetic_model: set together with a model or model_dir");
  }
  if (backend.cuda.device < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backend.cuda.device = ", backend.cuda.device, " must be >= 0"));
  }
  if (backend.cpu.num_threads < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backend.cpu.num_threads = ", backend.cpu.num_threads, " must be >= 0"));
  }
  if (cache_memory_budget_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache_memory_budget_bytes = ", cache_memory_budget_bytes,
                     " must be >= 0"));
  }
  const bool pools_set =
      scheduler.num_kv_blocks != 0 || scheduler.num_state_slots != 0;
  if (!pools_set && cache_memory_budget_bytes == 0) {
    return absl::InvalidArgumentError(
        "cache_memory_budget_bytes: must be > 0 when scheduler.num_kv_blocks "
        "and scheduler.num_state_slots are 0");
  }
  if (max_new_tokens_limit < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_new_tokens_limit = ", max_new_tokens_limit, " must be >= 1"));
  }
  return absl::OkStatus();
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() { Shutdown(absl::InfinitePast()); }

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    const EngineOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (options.model != nullptr) {
    impl->model = options.model;
  } else if (!options.synthetic_model.empty()) {
    ASSIGN_OR_RETURN(ModelDirectory synthetic,
                     ModelDirectory::Synthetic(options.synthetic_model));
    impl->owned_model.emplace(std::move(synthetic));
    impl->model = &*impl->owned_model;
  } else {
    ASSIGN_OR_RETURN(ModelDirectory loaded,
                     ModelDirectory::Load(options.model_dir));
    impl->owned_model.emplace(std::move(loaded));
    impl->model = &*impl->owned_model;
  }
  const ModelDirectory& model = *impl->model;
  for (const std::string& w : model.warnings()) LogWarning(w);
  const ModelConfig& config = model.config();
  impl->vocab_size = config.vocab_size;
  impl->step_residuals = ResidualSummary(
      static_cast<int>(config.num_hidden_layers));

  if (options.tokenizer != nullptr) {
    impl->tokenizer = options.tokenizer;
  } else if (options.load_tokenizer) {
    ASSIGN_OR_RETURN(impl->owned_tokenizer, Tokenizer::Load(model.dir()));
    impl->tokenizer = impl->owned_tokenizer.get();
  }
  bool eos_unresolved = false;
  impl->eos_ids = ResolveStopTokenIds(
      model.stop_tokens(),
      [&](absl::string_view text) -> std::optional<int32_t> {
        if (impl->tokenizer == nullptr) return std::nullopt;
        return impl->tokenizer->TokenToId(text);
      },
      &eos_unresolved);
  if (eos_unresolved) {
    LogWarning("the model's eos token \"", model.stop_tokens().eos_token_text,
               "\" is not in the tokenizer's vocabulary (or there is no "
               "tokenizer): generation stops on length only");
  }

  ASSIGN_OR_RETURN(impl->backend, CreateBackend(options.backend));
  LogInfo("backend: ", impl->backend->name());
  impl->device_sampling =
      options.device_sampling == EngineOptions::DeviceSampling::kOn ||
      (options.device_sampling == EngineOptions::DeviceSampling::kAuto &&
       options.backend.kind == BackendKind::kCuda);

  SchedulerConfig sc = options.scheduler;
  sc.max_sequence_tokens =
      std::min(sc.max_sequence_tokens, config.max_position_embeddings);
  // Bytes of one KV block (K and V in every attention layer) and of one
  // state slot (conv window and recurrent state in every GDN layer).
  const int64_t act = static_cast<int64_t>(
      ElementTypeSizeBytes(impl->backend->activation_type()));
  const ForwardWork work = ForwardWorkOf(config, model.weights(), act);
  const int64_t kv_block_bytes = sc.kv_block_size * work.kv_bytes_per_token;
  const int64_t state_slot_bytes = work.state_bytes_per_sequence;
  if (sc.num_kv_blocks == 0 && sc.num_state_slots == 0) {
    CacheMemoryBudget budget;
    budget.memory_budget_bytes = options.cache_memory_budget_bytes;
    budget.kv_block_bytes = kv_block_bytes;
    budget.state_slot_bytes = state_slot_bytes;
    budget.kv_block_size = sc.kv_block_size;
    budget.max_running_sequences = sc.max_running_sequences;
    budget.max_sequence_tokens = sc.max_sequence_tokens;
    ASSIGN_OR_RETURN(CacheCapacity cap, DeriveCacheCapacity(budget));
    sc.num_kv_blocks = cap.num_kv_blocks;
    sc.num_state_slots = cap.num_state_slots;
    LogInfo("cache budget ", budget.memory_budget_bytes, " bytes: KV block ",
            budget.kv_block_bytes, " bytes, state slot ",
            budget.state_slot_bytes, " bytes");
  }
  ASSIGN_OR_RETURN(impl->scheduler, Scheduler::Create(sc));
  impl->admission_capacity =
      std::min(sc.max_running_sequences, sc.num_state_slots) + sc.max_waiting;
  impl->context_tokens =
      std::min(sc.max_sequence_tokens, sc.num_kv_blocks * sc.kv_block_size);

  CacheConfig cache;
  cache.num_kv_blocks = sc.num_kv_blocks;
  cache.kv_block_size = sc.kv_block_size;
  cache.num_state_slots = sc.num_state_slots;
  WeightLoadOptions load;
  if (model.synthetic()) load.random_seed = options.synthetic_seed;
  // A progress line every tenth of the weights, for backends that copy them
  // (the CPU aliases the mapped checkpoint: nothing to wait for).
  if (options.backend.kind != BackendKind::kCpu || model.synthetic()) {
    load.progress = WeightLoadOptions::LogEveryTenth();
  }
  ASSIGN_OR_RETURN(impl->decoder,
                   HybridDecoder::Create(config, model.weights(),
                                         impl->backend.get(), cache, load));
  LogInfo("engine capacity: ", sc.num_kv_blocks, " KV blocks of ",
          sc.kv_block_size, " tokens, ", sc.num_state_slots,
          " state slots, context ", impl->context_tokens, " tokens, ",
          sc.max_running_sequences, " running sequences at most");

  if (options.seed_generator_seed) {
    impl->seed_generator.seed(*options.seed_generator_seed);
  } else {
    std::random_device device;
    impl->seed_generator.seed((static_cast<uint64_t>(device()) << 32) ^
                              device());
  }

  Capacity capacity;
  capacity.num_kv_blocks = sc.num_kv_blocks;
  capacity.kv_block_size = sc.kv_block_size;
  capacity.num_state_slots = sc.num_state_slots;
  capacity.max_sequence_tokens = impl->context_tokens;
  capacity.kv_block_bytes = kv_block_bytes;
  capacity.state_slot_bytes = state_slot_bytes;
  impl->Publish();
  Impl* raw = impl.get();
  std::unique_ptr<Engine> engine(new Engine(std::move(impl)));
  engine->capacity_ = capacity;
  engine->forward_work_ = work;
  raw->thread = std::thread([raw] { raw->Run(); });
  if (!options.engine_cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : options.engine_cpus) CPU_SET(cpu, &set);
    const int rc = pthread_setaffinity_np(raw->thread.native_handle(),
                                          sizeof(set), &set);
    if (rc != 0) {
      LogWarning("engine_cpus: cannot pin the engine thread (error ", rc,
                 "); it runs unpinned");
    } else {
      LogInfo("engine thread pinned to cores ",
              absl::StrJoin(options.engine_cpus, ","));
    }
  }
  return engine;
}

absl::StatusOr<uint64_t> Engine::Submit(GenerateRequest request,
                                        std::shared_ptr<TokenSink> sink) {
  Impl& impl = *impl_;
  if (sink == nullptr) {
    return absl::InvalidArgumentError("sink: must not be null");
  }
  auto r = std::make_unique<RequestState>();
  if (request.prompt_text) {
    if (!request.prompt_ids.empty()) {
      return absl::InvalidArgumentError(
          "prompt_ids and prompt_text: set exactly one");
    }
    if (impl.tokenizer == nullptr) {
      return absl::InvalidArgumentError(
          "prompt_text: the engine has no tokenizer; send prompt_ids");
    }
    absl::StatusOr<std::vector<int32_t>> ids =
        impl.tokenizer->Encode(*request.prompt_text);
    if (!ids.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt_text: ", ids.status().message()));
    }
    r->prompt = *std::move(ids);
    if (r->prompt.empty()) {
      return absl::InvalidArgumentError("prompt_text: encodes to no tokens");
    }
  } else {
    if (request.prompt_ids.empty()) {
      return absl::InvalidArgumentError("prompt_ids: the prompt is empty");
    }
    for (size_t i = 0; i < request.prompt_ids.size(); ++i) {
      const int32_t id = request.prompt_ids[i];
      if (id < 0 || id >= impl.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "prompt_ids[", i, "] = ", id, " is outside the vocabulary [0, ",
            impl.vocab_size, ")"));
      }
    }
    r->prompt = std::move(request.prompt_ids);
  }
  RETURN_IF_ERROR(request.sampling.Validate());
  ASSIGN_OR_RETURN(RequestInterventions interventions,
                   RequestInterventions::Create(request, impl.model->config()));
  if (!interventions.empty()) r->interventions.emplace(std::move(interventions));
  RETURN_IF_ERROR(
      request.sampling.ValidateTokenIds(static_cast<int32_t>(impl.vocab_size)));
  const int64_t num_prompt = static_cast<int64_t>(r->prompt.size());
  const int64_t room = impl.context_tokens - num_prompt;
  if (room < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt: ", num_prompt, " tokens leave no room to generate in the ",
        "context of ", impl.context_tokens, " tokens"));
  }
  if (request.sampling.max_new_tokens) {
    const int64_t max_new = *request.sampling.max_new_tokens;
    if (num_prompt + max_new > impl.context_tokens) {
      return absl::InvalidArgumentError(
          absl::StrCat("max_new_tokens = ", max_new, ": with the prompt's ",
                       num_prompt, " tokens it exceeds the context of ",
                       impl.context_tokens, " tokens"));
    }
    r->max_new_tokens = static_cast<int32_t>(max_new);
  } else {
    r->max_new_tokens = static_cast<int32_t>(
        std::min<int64_t>(room, impl.options.max_new_tokens_limit));
  }
  ASSIGN_OR_RETURN(
      StopMatcher matcher,
      StopMatcher::Create(request.sampling, impl.eos_ids, r->max_new_tokens));
  r->matcher.emplace(std::move(matcher));
  if (impl.tokenizer != nullptr) {
    r->decoder.emplace(*impl.tokenizer, request.skip_special_tokens);
  }
  r->params = std::move(request.sampling);
  r->priority = request.priority;
  if (impl.options.residual_stats) {
    r->want_residual_trace = request.residual_trace;
    if (request.residual_summary) {
      r->residual_summary.emplace(
          static_cast<int>(impl.model->config().num_hidden_layers));
    }
  }
  r->sink = std::move(sink);
  r->submit_time = absl::Now();

  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(impl.mu);
    if (impl.failed) {
      return absl::UnavailableError("the engine failed");
    }
    if (!impl.accepting) {
      return absl::UnavailableError("the engine is shutting down");
    }
    // Refused only when the running places and the waiting queue are both
    // full: a burst that arrives before the engine thread has scheduled any
    // of it still has the running places to go to.
    const int64_t admitted = impl.published_admitted +
                             static_cast<int64_t>(impl.inbox_requests.size());
    if (admitted >= impl.admission_capacity) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the engine is full: ", admitted,
          " requests running or queued (running places + max_waiting = ",
          impl.admission_capacity, ")"));
    }
    id = impl.next_id++;
    r->id = id;
    r->seed = EffectiveSeed(r->params, impl.seed_generator());
    impl.inbox_requests.push_back(std::move(r));
  }
  impl.cv.notify_one();
  return id;
}

void Engine::Cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->failed) return;
    impl_->inbox_cancels.push_back(id);
  }
  impl_->cv.notify_one();
}

void Engine::Shutdown(absl::Time deadline) {
  Impl& impl = *impl_;
  {
    std::lock_guard<std::mutex> lock(impl.mu);
    impl.accepting = false;
    if (!impl.stop_requested || deadline < impl.deadline) {
      impl.deadline = deadline;
    }
    impl.stop_requested = true;
  }
  impl.cv.notify_all();
  std::lock_guard<std::mutex> join_lock(impl.join_mu);
  if (impl.thread.joinable()) impl.thread.join();
}

const char* Engine::backend_name() const { return impl_->backend->name(); }

Engine::Counts Engine::counts() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  Counts c = impl_->counts;
  // Accepted but not drained by the engine thread yet: active already.
  c.num_active += static_cast<int64_t>(impl_->inbox_requests.size());
  c.failed = impl_->failed;
  return c;
}

}  // namespace tributary

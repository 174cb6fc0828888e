#include "tests/engine/runtime/engine_test_util.h"

#include <chrono>
#include <cstdlib>
#include <utility>

#include "gtest/gtest.h"

namespace tributary {
namespace testing_util {

std::string DefaultModelDir() {
  return std::string(TRIBUTARY_SOURCE_DIR) + "/models/tiny-shakespeare";
}

const ModelDirectory& DefaultModel() {
  static const ModelDirectory* model = [] {
    auto loaded = ModelDirectory::Load(DefaultModelDir());
    if (!loaded.ok()) std::abort();
    return new ModelDirectory(std::move(loaded).value());
  }();
  return *model;
}

const Tokenizer& DefaultTokenizer() {
  static const Tokenizer* tokenizer = [] {
    auto loaded = Tokenizer::Load(DefaultModelDir());
    if (!loaded.ok()) std::abort();
    return loaded.value().release();
  }();
  return *tokenizer;
}

std::vector<int32_t> Encode(const std::string& text) {
  auto ids = DefaultTokenizer().Encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{1};
}

GenerateRequest Greedy(std::vector<int32_t> prompt, int32_t max_new_tokens) {
  GenerateRequest request;
  request.prompt_ids = std::move(prompt);
  request.sampling.temperature = 0.0f;
  request.sampling.max_new_tokens = max_new_tokens;
  request.sampling.ignore_eos = true;
  return request;
}

EngineOptions SmallEngineOptions(int64_t num_kv_blocks,
                                 int64_t num_state_slots) {
  EngineOptions options;
  options.model = &DefaultModel();
  options.backend.cpu.num_threads = 1;
  options.scheduler.num_kv_blocks = num_kv_blocks;
  options.scheduler.num_state_slots = num_state_slots;
  options.scheduler.kv_block_size = 16;
  options.scheduler.max_running_sequences = num_state_slots;
  options.scheduler.max_tokens_per_step = 64;
  options.scheduler.max_waiting = 256;
  options.residual_stats = false;
  options.seed_generator_seed = 1234;
#if defined(TRIBUTARY_ENGINE_TESTS_ON_CUDA)
  // engine_cuda_emulated_test: the same tests with the CUDA backend (on its
  // CPU emulation).
  options.backend.kind = BackendKind::kCuda;
#endif
  return options;
}

void RecordingSink::OnEvent(const TokenEvent& event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (num_finals_ > 0) ++num_violations_;
  if (!events_.empty() && events_.front().request_id != event.request_id) {
    ++num_violations_;
  }
  events_.push_back(event);
  if (event.is_final) {
    ++num_finals_;
    cv_.notify_all();
  }
}

bool RecordingSink::WaitFinal(absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                      [this] { return num_finals_ > 0; });
}

int RecordingSink::num_finals() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_finals_;
}

int RecordingSink::num_violations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return num_violations_;
}

std::vector<TokenEvent> RecordingSink::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

TokenEvent RecordingSink::final_event() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.back();
}

std::vector<int32_t> RecordingSink::token_ids() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int32_t> ids;
  for (const TokenEvent& e : events_) {
    if (e.has_token) ids.push_back(e.token_id);
  }
  return ids;
}

std::string RecordingSink::text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string text;
  for (const TokenEvent& e : events_) text += e.text;
  return text;
}

std::function<absl::Status()> StartGate::Hook() {
  return [this]() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return open_; });
    return absl::OkStatus();
  };
}

void StartGate::Open() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
  }
  cv_.notify_all();
}

}  // namespace testing_util
}  // namespace tributary

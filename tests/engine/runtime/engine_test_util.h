// Shared helpers of the engine tests: the default model, loaded once, and a
// sink that records events and checks the event protocol.
#ifndef TRIBUTARY_TESTS_ENGINE_RUNTIME_ENGINE_TEST_UTIL_H_
#define TRIBUTARY_TESTS_ENGINE_RUNTIME_ENGINE_TEST_UTIL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tests/hang_guard.h"
#include "engine/runtime/engine.h"
#include "engine/model/model_directory.h"
#include "engine/runtime/request.h"
#include "engine/tokenizer/tokenizer.h"

namespace tributary {
namespace testing_util {

std::string DefaultModelDir();
// Loaded once per process.
const ModelDirectory& DefaultModel();
const Tokenizer& DefaultTokenizer();

// The default tokenizer's ids of `text` (a test failure if it cannot).
std::vector<int32_t> Encode(const std::string& text);

// A greedy request for exactly `max_new_tokens` tokens (EOS ignored).
GenerateRequest Greedy(std::vector<int32_t> prompt, int32_t max_new_tokens);

// Options on the default model with explicit pools.
EngineOptions SmallEngineOptions(int64_t num_kv_blocks,
                                 int64_t num_state_slots);

// Holds an engine's first forward (EngineOptions::fault_hook = Hook()) until
// Open(): requests submitted before it share the first steps however the
// threads are scheduled on a loaded machine. Must outlive the engine.
class StartGate {
 public:
  std::function<absl::Status()> Hook();
  void Open();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// Records events; counts protocol violations (an event after the final one,
// an event for another request id).
class RecordingSink : public TokenSink {
 public:
  void OnEvent(const TokenEvent& event) override;

  // Waits for the final event; false on timeout (kHangGuard: only a hang).
  bool WaitFinal(absl::Duration timeout);

  int num_finals() const;
  int num_violations() const;
  std::vector<TokenEvent> events() const;
  TokenEvent final_event() const;  // requires num_finals() == 1
  std::vector<int32_t> token_ids() const;
  std::string text() const;  // concatenated deltas

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<TokenEvent> events_;
  int num_finals_ = 0;
  int num_violations_ = 0;
};

}  // namespace testing_util
}  // namespace tributary

#endif  // TRIBUTARY_TESTS_ENGINE_RUNTIME_ENGINE_TEST_UTIL_H_

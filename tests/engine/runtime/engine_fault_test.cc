// The engine's error paths, through fault injection (EngineOptions::
// fault_hook): a failed forward fails that step's requests with INTERNAL and
// the engine goes on; an UNAVAILABLE backend fails the engine.
#include <atomic>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "engine/runtime/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/engine_test_util.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using testing_util::RecordingSink;
using testing_util::SmallEngineOptions;


GenerateRequest Request(int32_t max_new_tokens) {
  return testing_util::Greedy({10, 20, 30, 40}, max_new_tokens);
}

TEST(EngineFaultTest, FailedForwardFailsItsRequestsAndTheEngineGoesOn) {
  std::atomic<int> calls{0};
  EngineOptions options = SmallEngineOptions(64, 4);
  // The third forward fails.
  options.fault_hook = [&calls]() -> absl::Status {
    return ++calls == 3 ? absl::InternalError("injected fault")
                        : absl::OkStatus();
  };
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE((*engine)->Submit(Request(10), sink).ok());
  ASSERT_TRUE(sink->WaitFinal(testing_util::kHangGuard));
  const TokenEvent final_event = sink->final_event();
  EXPECT_EQ(final_event.status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(final_event.status.message()),
              HasSubstr("injected fault"));
  EXPECT_EQ(sink->num_violations(), 0);
  // The next request is served normally; nothing leaked.
  auto next = std::make_shared<RecordingSink>();
  ASSERT_TRUE((*engine)->Submit(Request(5), next).ok());
  ASSERT_TRUE(next->WaitFinal(testing_util::kHangGuard));
  EXPECT_TRUE(next->final_event().status.ok());
  EXPECT_EQ(next->token_ids().size(), 5u);
  (*engine)->Shutdown(absl::Now() + testing_util::kHangGuard);
  const Engine::Counts counts = (*engine)->counts();
  EXPECT_FALSE(counts.failed);
  EXPECT_EQ(counts.num_active, 0);
  EXPECT_EQ(counts.num_free_kv_blocks, 64);
  EXPECT_EQ(counts.num_free_state_slots, 4);
}

TEST(EngineFaultTest, UnavailableBackendFailsTheEngine) {
  std::atomic<int> calls{0};
  EngineOptions options = SmallEngineOptions(64, 4);
  options.fault_hook = [&calls]() -> absl::Status {
    return ++calls >= 4 ? absl::UnavailableError("device lost")
                        : absl::OkStatus();
  };
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 3; ++i) {
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE((*engine)->Submit(Request(50), sinks.back()).ok());
  }
  for (auto& sink : sinks) {
    ASSERT_TRUE(sink->WaitFinal(testing_util::kHangGuard));
    EXPECT_EQ(sink->final_event().status.code(),
              absl::StatusCode::kUnavailable);
    EXPECT_EQ(sink->num_violations(), 0);
  }
  EXPECT_TRUE((*engine)->counts().failed);
  auto late = std::make_shared<RecordingSink>();
  EXPECT_EQ((*engine)->Submit(Request(5), late).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace tributary

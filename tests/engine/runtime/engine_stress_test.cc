// Randomised stress: two client threads submit and cancel thousands of
// requests on a cache small enough to preempt; afterwards everything is free
// and every request got exactly one final event.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/runtime/engine.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/engine_test_util.h"

namespace tributary {
namespace {

using testing_util::RecordingSink;
using testing_util::SmallEngineOptions;

struct Submitted {
  uint64_t id = 0;
  std::shared_ptr<RecordingSink> sink;
  bool cancelled = false;
};

TEST(EngineStressTest, RandomSubmitAndCancel) {
  constexpr int kThreads = 2;
  constexpr int kEventsPerThread = 1500;
  constexpr int64_t kBlocks = 8;  // 128 tokens: preemption is frequent
  constexpr int64_t kSlots = 4;
  EngineOptions options = SmallEngineOptions(kBlocks, kSlots);
  options.scheduler.max_tokens_per_step = 48;
  options.scheduler.max_waiting = 48;
  auto created = Engine::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  Engine& engine = **created;

  std::vector<std::vector<Submitted>> submitted(kThreads);
  std::atomic<int> num_exhausted{0};
  std::atomic<int> num_other_errors{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + static_cast<uint64_t>(t));
      std::vector<Submitted>& mine = submitted[static_cast<size_t>(t)];
      for (int e = 0; e < kEventsPerThread; ++e) {
        const int kind = static_cast<int>(rng() % 10);
        if (kind < 8 || mine.empty()) {
          GenerateRequest r;
          const int len = 1 + static_cast<int>(rng() % 60);
          for (int i = 0; i < len; ++i) {
            r.prompt_ids.push_back(static_cast<int32_t>(rng() % 3008));
          }
          r.sampling.max_new_tokens = 1 + static_cast<int32_t>(rng() % 10);
          r.priority = static_cast<int>(rng() % 3);
          if (rng() % 2 == 0) {
            r.sampling.temperature = 0.0f;
          } else {
            r.sampling.seed = rng();
            r.sampling.top_k = 20;
          }
          auto sink = std::make_shared<RecordingSink>();
          auto id = engine.Submit(std::move(r), sink);
          if (id.ok()) {
            mine.push_back({*id, sink, false});
          } else if (id.status().code() ==
                     absl::StatusCode::kResourceExhausted) {
            ++num_exhausted;
            std::this_thread::sleep_for(std::chrono::milliseconds(3));
          } else {
            ++num_other_errors;
          }
        } else {
          // Mostly recent requests, which are likely still alive.
          const size_t back = std::min<size_t>(mine.size(), 8);
          Submitted& victim = mine[mine.size() - 1 - rng() % back];
          victim.cancelled = true;
          engine.Cancel(victim.id);
          if (rng() % 4 == 0) engine.Cancel(victim.id);  // twice is fine
        }
        if (rng() % 16 == 0) {
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
        }
      }
    });
  }
  for (std::thread& c : clients) c.join();

  int64_t num_requests = 0;
  int64_t num_cancelled = 0;
  for (auto& mine : submitted) {
    for (Submitted& s : mine) {
      ++num_requests;
      ASSERT_TRUE(s.sink->WaitFinal(testing_util::kHangGuard)) << s.id;
    }
  }
  // Everything returns to the pools once the finished sequences are
  // forgotten (the next Schedule()).
  Engine::Counts counts;
  const absl::Time give_up = absl::Now() + testing_util::kHangGuard;
  do {
    counts = engine.counts();
    if (counts.num_sequences == 0 && counts.num_active == 0) break;
    absl::SleepFor(absl::Milliseconds(1));
  } while (absl::Now() < give_up);
  EXPECT_EQ(counts.num_active, 0);
  EXPECT_EQ(counts.num_sequences, 0);
  EXPECT_EQ(counts.num_waiting, 0);
  EXPECT_EQ(counts.num_running, 0);
  EXPECT_EQ(counts.num_free_kv_blocks, kBlocks);
  EXPECT_EQ(counts.num_free_state_slots, kSlots);
  EXPECT_GT(counts.num_preemptions, 0);
  EXPECT_EQ(num_other_errors.load(), 0);

  for (auto& mine : submitted) {
    for (Submitted& s : mine) {
      EXPECT_EQ(s.sink->num_finals(), 1) << s.id;
      EXPECT_EQ(s.sink->num_violations(), 0) << s.id;
      const TokenEvent last = s.sink->final_event();
      ASSERT_TRUE(last.is_final);
      EXPECT_TRUE(last.status.ok()) << last.status;
      ASSERT_TRUE(last.finish_reason.has_value());
      if (*last.finish_reason == FinishReason::kCancelled) {
        EXPECT_TRUE(s.cancelled) << s.id;
        ++num_cancelled;
      } else {
        EXPECT_EQ(*last.finish_reason, FinishReason::kLength) << s.id;
      }
      EXPECT_EQ(static_cast<int64_t>(s.sink->token_ids().size()),
                last.usage.num_generated_tokens);
    }
  }
  RecordProperty("requests", static_cast<int>(num_requests));
  RecordProperty("cancelled", static_cast<int>(num_cancelled));
  RecordProperty("exhausted", num_exhausted.load());
  RecordProperty("steps", static_cast<int>(counts.num_steps));
  RecordProperty("preemptions", static_cast<int>(counts.num_preemptions));
  std::printf(
      "requests %lld, cancelled %lld, queue full %d, steps %lld, "
      "preemptions %lld\n",
      static_cast<long long>(num_requests),
      static_cast<long long>(num_cancelled), num_exhausted.load(),
      static_cast<long long>(counts.num_steps),
      static_cast<long long>(counts.num_preemptions));
  engine.Shutdown(absl::Now());
}

}  // namespace
}  // namespace tributary

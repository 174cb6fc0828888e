#include "engine/runtime/engine.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/backend/cpu/matmul.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/engine_test_util.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using testing_util::DefaultModel;
using testing_util::DefaultTokenizer;
using testing_util::Encode;
using testing_util::Greedy;
using testing_util::RecordingSink;
using testing_util::SmallEngineOptions;


// Submits and waits for the final event.
std::shared_ptr<RecordingSink> RunToEnd(Engine& engine,
                                        GenerateRequest request) {
  auto sink = std::make_shared<RecordingSink>();
  auto id = engine.Submit(std::move(request), sink);
  EXPECT_TRUE(id.ok()) << id.status();
  if (id.ok()) {
    EXPECT_TRUE(sink->WaitFinal(testing_util::kHangGuard));
  }
  return sink;
}

const std::vector<std::string>& Prompts() {
  static const std::vector<std::string> prompts = {
      "ROMEO:\nBut soft, what light",
      "KING RICHARD:\nNow is the winter of our discontent, made glorious",
      "First Citizen:\nBefore we proceed any further, hear me speak.",
      "JULIET:\nO",
      "HAMLET:\nTo be, or not to be, that is the question: whether 'tis "
      "nobler in the mind to suffer the slings and arrows",
      "MENENIUS:\nWhat work's, my countrymen, in hand? where go you",
  };
  return prompts;
}

TEST(EngineTest, SubmitValidationNamesTheField) {
  auto engine = Engine::Create(SmallEngineOptions(16, 2));
  ASSERT_TRUE(engine.ok()) << engine.status();
  Engine& e = **engine;
  auto sink = std::make_shared<RecordingSink>();
  auto expect_error = [&](GenerateRequest r, absl::string_view field) {
    auto id = e.Submit(std::move(r), sink);
    ASSERT_FALSE(id.ok()) << field;
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(id.status().message()), HasSubstr(field));
  };
  expect_error(GenerateRequest{}, "prompt_ids");
  expect_error(Greedy({1, 5000, 2}, 4), "prompt_ids[1]");
  expect_error(Greedy({1, -1}, 4), "prompt_ids[1]");
  {
    GenerateRequest r = Greedy({1, 2}, 4);
    r.prompt_text = "hello";
    expect_error(r, "prompt_text");
  }
  {
    GenerateRequest r;
    r.prompt_text = "hello";  // no tokenizer in this engine
    expect_error(r, "prompt_text");
  }
  {
    GenerateRequest r = Greedy({1, 2}, 4);
    r.sampling.temperature = -1.0f;
    expect_error(r, "temperature");
  }
  {
    GenerateRequest r = Greedy({1, 2}, 4);
    r.sampling.top_p = 0.0f;
    expect_error(r, "top_p");
  }
  {
    GenerateRequest r = Greedy({1, 2}, 4);
    r.sampling.stop_token_ids = {3008};
    expect_error(r, "stop_token_ids");
  }
  {
    GenerateRequest r = Greedy({1, 2}, 4);
    r.sampling.stop_strings = {""};
    expect_error(r, "stop_strings");
  }
  expect_error(Greedy({1, 2}, 0), "max_new_tokens");
  // The pool holds 16 blocks of 16 = 256 tokens: the context.
  EXPECT_EQ(e.capacity().max_sequence_tokens, 256);
  expect_error(Greedy({1, 2}, 255), "max_new_tokens");
  expect_error(Greedy(std::vector<int32_t>(256, 7), 1), "prompt");
  {
    auto id = e.Submit(Greedy({1, 2}, 4), nullptr);
    ASSERT_FALSE(id.ok());
    EXPECT_THAT(std::string(id.status().message()), HasSubstr("sink"));
  }
  EXPECT_EQ(sink->events().size(), 0u);
  // A request without max_new_tokens gets the room left in the context.
  GenerateRequest r = Greedy({1, 2}, 4);
  r.sampling.max_new_tokens.reset();
  auto done = RunToEnd(e, r);
  EXPECT_EQ(done->final_event().usage.num_generated_tokens, 254);
  EXPECT_EQ(done->final_event().finish_reason, FinishReason::kLength);
}

TEST(EngineTest, OptionsValidation) {
  EngineOptions options;
  EXPECT_THAT(std::string(Engine::Create(options).status().message()),
              HasSubstr("model"));
  options = SmallEngineOptions(16, 2);
  options.backend.cpu.num_threads = -1;
  EXPECT_THAT(std::string(Engine::Create(options).status().message()),
              HasSubstr("num_threads"));
  options = SmallEngineOptions(0, 0);
  EXPECT_THAT(std::string(Engine::Create(options).status().message()),
              HasSubstr("cache_memory_budget_bytes"));
  options.scheduler.max_running_sequences = 8;
  options.cache_memory_budget_bytes = int64_t{64} << 20;
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_GT((*engine)->capacity().num_kv_blocks, 0);
  EXPECT_GT((*engine)->capacity().num_state_slots, 0);
  EXPECT_EQ((*engine)->capacity().max_sequence_tokens, 1024);
}

// build_info and GetModelInfo report this name: a CUDA engine must not say
// "cpu".
TEST(EngineTest, ReportsTheBackendItRunsOn) {
  auto engine = Engine::Create(SmallEngineOptions(64, 1));
  ASSERT_TRUE(engine.ok()) << engine.status();
#if defined(TRIBUTARY_ENGINE_TESTS_ON_CUDA)
  EXPECT_STREQ((*engine)->backend_name(), "cuda");
#else
  EXPECT_STREQ((*engine)->backend_name(), "cpu");
#endif
}

// Submit refuses a request only when every running place and the whole
// waiting queue are taken: a burst of exactly max_running_sequences +
// max_waiting on an idle engine is admitted, one more is refused. The gate
// holds the first forward, so that nothing finishes during the burst.
TEST(EngineTest, AdmitsRunningPlacesPlusWaitingAndRefusesOneMore) {
  constexpr int kRunning = 4;
  constexpr int kWaiting = 2;
  testing_util::StartGate gate;
  EngineOptions options = SmallEngineOptions(64, kRunning);
  options.scheduler.max_waiting = kWaiting;
  options.fault_hook = gate.Hook();
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  std::vector<uint64_t> ids;
  for (int i = 0; i < kRunning + kWaiting; ++i) {
    auto sink = std::make_shared<RecordingSink>();
    auto id = (*engine)->Submit(Greedy({1, 2, 3}, 500), sink);
    ASSERT_TRUE(id.ok()) << "request " << i << ": " << id.status();
    sinks.push_back(sink);
    ids.push_back(*id);
  }
  auto refused = (*engine)->Submit(Greedy({1, 2, 3}, 500),
                                   std::make_shared<RecordingSink>());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("engine is full"));
  gate.Open();
  for (uint64_t id : ids) (*engine)->Cancel(id);
  for (auto& sink : sinks) {
    ASSERT_TRUE(sink->WaitFinal(testing_util::kHangGuard));
    EXPECT_EQ(sink->final_event().finish_reason, FinishReason::kCancelled);
    EXPECT_EQ(sink->num_violations(), 0);
  }
  // Room again once they are gone: a new burst of the same size fits.
  for (int i = 0; i < kRunning + kWaiting; ++i) {
    auto sink = std::make_shared<RecordingSink>();
    auto id = (*engine)->Submit(Greedy({1, 2, 3}, 2), sink);
    ASSERT_TRUE(id.ok()) << "request " << i << ": " << id.status();
    sinks.push_back(sink);
  }
  for (auto& sink : sinks) ASSERT_TRUE(sink->WaitFinal(testing_util::kHangGuard));
}

TEST(EngineTest, ShutdownCancelsWorkInFlight) {
  auto engine = Engine::Create(SmallEngineOptions(64, 2));
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 4; ++i) {
    auto sink = std::make_shared<RecordingSink>();
    ASSERT_TRUE((*engine)->Submit(Greedy({1, 2, 3, 4}, 1000), sink).ok());
    sinks.push_back(sink);
  }
  absl::SleepFor(absl::Milliseconds(20));
  (*engine)->Shutdown(absl::Now());
  // Cut by the engine, not cancelled by a client: UNAVAILABLE (retryable).
  for (auto& sink : sinks) {
    EXPECT_EQ(sink->num_finals(), 1);
    EXPECT_EQ(sink->num_violations(), 0);
    EXPECT_EQ(sink->final_event().status.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(std::string(sink->final_event().status.message()),
                HasSubstr("draining"));
    EXPECT_FALSE(sink->final_event().finish_reason.has_value());
  }
  auto late =
      (*engine)->Submit(Greedy({1}, 1), std::make_shared<RecordingSink>());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
  (*engine)->Shutdown(absl::Now());  // idempotent
  Engine::Counts counts = (*engine)->counts();
  EXPECT_EQ(counts.num_active, 0);
  EXPECT_EQ(counts.num_free_kv_blocks, 64);
  EXPECT_EQ(counts.num_free_state_slots, 2);
}

TEST(EngineTest, ShutdownWithDeadlineLetsWorkFinish) {
  auto engine = Engine::Create(SmallEngineOptions(64, 2));
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE((*engine)->Submit(Greedy({1, 2, 3}, 5), sink).ok());
  (*engine)->Shutdown(absl::Now() + testing_util::kHangGuard);
  EXPECT_EQ(sink->num_finals(), 1);
  EXPECT_EQ(sink->final_event().finish_reason, FinishReason::kLength);
  EXPECT_EQ(sink->token_ids().size(), 5u);
}

class CountingObserver : public EngineObserver {
 public:
  void OnStep(const StepStats& stats) override {
    ++num_steps;
    max_batch = std::max(max_batch, stats.num_sequences);
    ok = ok && stats.num_tokens >= stats.num_sequences &&
         stats.step_seconds >= stats.forward_seconds &&
         stats.outside_forward_seconds >= 0.0;
  }
  int64_t num_steps = 0;  // engine thread only; read after Shutdown
  int64_t max_batch = 0;
  bool ok = true;
};

class RecordingObserver : public EngineObserver {
 public:
  void OnStep(const StepStats& stats) override { steps.push_back(stats); }
  std::vector<StepStats> steps;  // engine thread only; read after Shutdown
};

// The step shape a roofline needs: a 6-token prompt in chunks of 4, then
// decodes, each step's counts worked out by hand from the schedule.
TEST(EngineTest, StepStatsCarryTheStepsShape) {
  EngineOptions options = SmallEngineOptions(64, 2);
  options.scheduler.max_tokens_per_step = 4;
  RecordingObserver observer;
  options.observer = &observer;
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto sink = RunToEnd(**engine, Greedy({1, 2, 3, 4, 5, 6}, 3));
  EXPECT_EQ(sink->token_ids().size(), 3u);
  (*engine)->Shutdown(absl::Now() + testing_util::kHangGuard);
  struct Expected {
    int64_t tokens, sampled, attended_keys, context_tokens;
  };
  const std::vector<Expected> expected = {
      {4, 0, 1 + 2 + 3 + 4, 4},  // chunk at positions 0–3
      {2, 1, 5 + 6, 6},          // positions 4–5 end the prefill: sample
      {1, 1, 7, 7},              // decode at position 6
      {1, 1, 8, 8},              // decode at position 7: the 3rd token
  };
  ASSERT_EQ(observer.steps.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(i);
    const StepStats& got = observer.steps[i];
    EXPECT_EQ(got.num_sequences, 1);
    EXPECT_EQ(got.num_tokens, expected[i].tokens);
    EXPECT_EQ(got.num_sampled, expected[i].sampled);
    EXPECT_EQ(got.attended_keys, expected[i].attended_keys);
    EXPECT_EQ(got.context_tokens, expected[i].context_tokens);
  }
  // The cache sizes the engine reports are the work's.
  const ForwardWork& work = (*engine)->forward_work();
  EXPECT_EQ((*engine)->capacity().state_slot_bytes,
            work.state_bytes_per_sequence);
  EXPECT_EQ((*engine)->capacity().kv_block_bytes,
            (*engine)->capacity().kv_block_size * work.kv_bytes_per_token);
}

// N greedy requests at once == the same requests one at a time, also on a
// cache so small that sequences are preempted and recomputed.
TEST(EngineTest, BatchInvarianceEndToEnd) {
  constexpr int32_t kMaxNew = 24;
  std::vector<std::vector<int32_t>> alone;
  {
    auto engine = Engine::Create(SmallEngineOptions(64, 8));
    ASSERT_TRUE(engine.ok()) << engine.status();
    for (const std::string& p : Prompts()) {
      alone.push_back(
          RunToEnd(**engine, Greedy(Encode(p), kMaxNew))->token_ids());
      ASSERT_EQ(alone.back().size(), static_cast<size_t>(kMaxNew));
    }
  }
  for (int64_t num_blocks : {64, 8}) {
    SCOPED_TRACE(num_blocks);
    // Every request waits for the first step (on a loaded machine the
    // first could otherwise run alone for a while), so that they share
    // steps and, on 8 blocks, preempt each other: the checks below count
    // on both.
    testing_util::StartGate gate;
    EngineOptions options = SmallEngineOptions(num_blocks, 4);
    options.scheduler.max_tokens_per_step = 24;  // chunked prefills
    options.residual_stats = true;
    options.fault_hook = gate.Hook();
    CountingObserver observer;
    options.observer = &observer;
    auto engine = Engine::Create(options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::vector<std::shared_ptr<RecordingSink>> sinks;
    for (const std::string& p : Prompts()) {
      auto sink = std::make_shared<RecordingSink>();
      ASSERT_TRUE((*engine)->Submit(Greedy(Encode(p), kMaxNew), sink).ok());
      sinks.push_back(sink);
    }
    gate.Open();
    for (size_t i = 0; i < sinks.size(); ++i) {
      ASSERT_TRUE(sinks[i]->WaitFinal(testing_util::kHangGuard));
      EXPECT_EQ(sinks[i]->token_ids(), alone[i]) << "request " << i;
      EXPECT_EQ(sinks[i]->num_violations(), 0);
    }
    if (num_blocks == 8) {
      EXPECT_GT((*engine)->counts().num_preemptions, 0);
    }
    (*engine)->Shutdown(absl::Now());
    EXPECT_GT(observer.num_steps, 0);
    EXPECT_GT(observer.max_batch, 1);
    EXPECT_TRUE(observer.ok);
  }
}

TEST(EngineTest, SeededSamplingIsReproducibleInAnyBatch) {
  auto seeded = [] {
    GenerateRequest r;
    r.prompt_ids = Encode("ROMEO:\nBut soft");
    r.sampling.temperature = 0.9f;
    r.sampling.top_k = 40;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = 77;
    r.sampling.max_new_tokens = 20;
    r.sampling.ignore_eos = true;
    r.sampling.num_logprobs = 3;
    return r;
  };
  std::vector<int32_t> alone;
  {
    auto engine = Engine::Create(SmallEngineOptions(64, 8));
    ASSERT_TRUE(engine.ok());
    auto sink = RunToEnd(**engine, seeded());
    alone = sink->token_ids();
    ASSERT_EQ(alone.size(), 20u);
    for (const TokenEvent& e : sink->events()) {
      if (!e.has_token) continue;
      ASSERT_TRUE(e.logprob.has_value());
      EXPECT_LE(*e.logprob, 0.0f);
      EXPECT_EQ(e.top_logprobs.size(), 3u);
    }
  }
  for (int64_t num_blocks : {64, 8}) {
    EngineOptions options = SmallEngineOptions(num_blocks, 4);
    options.seed_generator_seed = 99;
    auto engine = Engine::Create(options);
    ASSERT_TRUE(engine.ok());
    std::vector<std::shared_ptr<RecordingSink>> others;
    for (int i = 0; i < 3; ++i) {
      GenerateRequest r;
      r.prompt_ids = Encode(Prompts()[static_cast<size_t>(i)]);
      r.sampling.max_new_tokens = 30;  // unseeded
      auto sink = std::make_shared<RecordingSink>();
      ASSERT_TRUE((*engine)->Submit(r, sink).ok());
      others.push_back(sink);
    }
    auto sink = RunToEnd(**engine, seeded());
    EXPECT_EQ(sink->token_ids(), alone) << num_blocks;
    for (auto& other : others) ASSERT_TRUE(other->WaitFinal(testing_util::kHangGuard));
  }
}

// Requests without penalties draw on the backend (ChooseTokens) when
// device sampling is on, logprobs included: the same tokens and logprobs as
// the host sampler's, alone and (on the CPU) in a batch (a sampled request,
// one asking 3 top logprobs, a greedy one asking 2, and one with every
// penalty and a logprob). On the CPU both
// follow one rule exactly; on a device (the emulated CUDA run of this test)
// only sums in another order could move a draw, and none of these does; its
// logprobs agree to f32 rounding. The batch is compared on the CPU only: on
// CUDA a decode that shares its step with a prefill (more than 8 rows) goes
// through cuBLAS instead of the few-token kernel, whose sums differ, and
// whether it does depends on when the engine thread picks the requests up.
TEST(EngineTest, DeviceSamplingGivesTheHostSamplersTokens) {
  auto request = [](int32_t seed) {
    GenerateRequest r;
    r.prompt_ids = Encode("ROMEO:\nBut soft");
    r.sampling.temperature = seed == 7 ? 0.0f : 0.9f;
    r.sampling.top_k = seed % 2 == 0 ? 40 : 0;
    r.sampling.top_p = 0.95f;
    r.sampling.min_p = 0.02f;
    r.sampling.seed = seed;
    if (seed == 6) r.sampling.num_logprobs = 3;
    if (seed == 7) r.sampling.num_logprobs = 2;
    if (seed == 8) {
      r.sampling.repetition_penalty = 1.3f;
      r.sampling.presence_penalty = 0.4f;
      r.sampling.frequency_penalty = 0.3f;
      r.sampling.num_logprobs = 1;
    }
    r.sampling.max_new_tokens = 8;
    r.sampling.ignore_eos = true;
    return r;
  };
  const std::vector<int32_t> seeds = {5, 6, 7, 8};
  std::vector<std::shared_ptr<RecordingSink>> host;
  {
    EngineOptions options = SmallEngineOptions(64, 4);
    options.device_sampling = EngineOptions::DeviceSampling::kOff;
    auto engine = Engine::Create(options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    for (int32_t seed : seeds) {
      host.push_back(RunToEnd(**engine, request(seed)));
      ASSERT_EQ(host.back()->token_ids().size(), 8u);
    }
  }
  EXPECT_NE(host[0]->token_ids(), host[1]->token_ids());
  auto expect_same = [](const RecordingSink& got, const RecordingSink& want) {
    EXPECT_EQ(got.token_ids(), want.token_ids());
    const std::vector<TokenEvent>& a = got.events();
    const std::vector<TokenEvent>& b = want.events();
    ASSERT_EQ(a.size(), b.size());
    for (size_t e = 0; e < a.size(); ++e) {
      ASSERT_EQ(a[e].logprob.has_value(), b[e].logprob.has_value());
      if (a[e].logprob) {
        EXPECT_NEAR(*a[e].logprob, *b[e].logprob, 1e-5);
      }
      ASSERT_EQ(a[e].top_logprobs.size(), b[e].top_logprobs.size());
      for (size_t k = 0; k < a[e].top_logprobs.size(); ++k) {
        EXPECT_EQ(a[e].top_logprobs[k].token_id, b[e].top_logprobs[k].token_id);
        EXPECT_NEAR(a[e].top_logprobs[k].logprob, b[e].top_logprobs[k].logprob, 1e-5);
      }
    }
  };
  EngineOptions options = SmallEngineOptions(64, 4);
  options.device_sampling = EngineOptions::DeviceSampling::kOn;
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  expect_same(*RunToEnd(**engine, request(6)), *host[1]);
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int32_t seed : seeds) {
    auto sink = std::make_shared<RecordingSink>();
    ASSERT_TRUE((*engine)->Submit(request(seed), sink).ok());
    sinks.push_back(sink);
  }
  for (size_t i = 0; i < sinks.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(sinks[i]->WaitFinal(testing_util::kHangGuard));
#if !defined(TRIBUTARY_ENGINE_TESTS_ON_CUDA)
    expect_same(*sinks[i], *host[i]);
#endif
  }
  EXPECT_EQ(sinks[1]->events().front().top_logprobs.size(), 3u);
  expect_same(*RunToEnd(**engine, request(7)), *host[2]);
  expect_same(*RunToEnd(**engine, request(8)), *host[3]);
}

// EngineOptions::cpu_matmul_precision reaches the backend: bf16 products
// move the first token's distribution, slightly (~1e-3 of the logits' range
// on this model). Only the first step is compared: its input is the same
// prompt in both runs, while a near-tie (this prompt's top two logits are
// 0.004 apart) may send the generations different ways afterwards.
TEST(EngineTest, Bf16MatMulsMoveTheLogprobsSlightly) {
  if (!MatMulBf16DotSupported()) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  auto run = [](MatMulPrecision precision) {
    EngineOptions options = SmallEngineOptions(64, 4);
    options.backend.cpu.matmul_precision = precision;
    auto engine = Engine::Create(options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    GenerateRequest r = Greedy(Encode("ROMEO:\nBut soft"), 1);
    r.sampling.num_logprobs = 5;
    return engine.ok() ? RunToEnd(**engine, std::move(r)) : nullptr;
  };
  const auto f32 = run(MatMulPrecision::kF32);
  const auto bf16 = run(MatMulPrecision::kBF16);
  ASSERT_TRUE(f32 && bf16);
  const std::vector<TokenEvent> a = f32->events(), b = bf16->events();
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  ASSERT_EQ(a.front().top_logprobs.size(), 5u);
  ASSERT_EQ(b.front().top_logprobs.size(), 5u);
  int compared = 0, moved = 0;
  for (const TokenLogprob& x : a.front().top_logprobs) {
    for (const TokenLogprob& y : b.front().top_logprobs) {
      if (x.token_id != y.token_id) continue;
      EXPECT_NEAR(y.logprob, x.logprob, 0.05) << "token " << x.token_id;
      ++compared;
      moved += y.logprob != x.logprob;
    }
  }
  EXPECT_GE(compared, 4);  // the top five hold the same tokens, near-ties aside
  EXPECT_GT(moved, 0);
}

// Penalized requests sampled on the backend keep their penalty history token
// by token (PenaltyHistory); preemption by recompute keeps the output, so
// the history must stay right across it. Four penalized greedy requests in
// a pool small enough to preempt, with device sampling on and off: the same
// tokens. (The schedule is the same in both runs: all four are submitted
// before the first step, and nothing arrives later.)
TEST(EngineTest, PenalizedDeviceSamplingSurvivesPreemption) {
  auto run = [](EngineOptions::DeviceSampling sampling, int64_t* preemptions) {
    EngineOptions options = SmallEngineOptions(5, 4);
    options.scheduler.max_tokens_per_step = 16;
    options.device_sampling = sampling;
    testing_util::StartGate gate;
    options.fault_hook = gate.Hook();
    auto engine = Engine::Create(options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    std::vector<std::vector<int32_t>> tokens;
    if (!engine.ok()) return tokens;
    std::vector<std::shared_ptr<RecordingSink>> sinks;
    for (size_t i = 0; i < 4; ++i) {
      GenerateRequest r = Greedy(Encode(Prompts()[i]), 24);
      r.sampling.repetition_penalty = 1.3f;
      r.sampling.presence_penalty = 0.5f;
      r.sampling.frequency_penalty = 0.4f;
      sinks.push_back(std::make_shared<RecordingSink>());
      EXPECT_TRUE((*engine)->Submit(std::move(r), sinks.back()).ok());
    }
    gate.Open();
    for (const auto& sink : sinks) {
      EXPECT_TRUE(sink->WaitFinal(testing_util::kHangGuard));
      tokens.push_back(sink->token_ids());
    }
    *preemptions = (*engine)->counts().num_preemptions;
    (*engine)->Shutdown(absl::Now());
    return tokens;
  };
  int64_t host_preemptions = 0, device_preemptions = 0;
  const auto host = run(EngineOptions::DeviceSampling::kOff, &host_preemptions);
  const auto device =
      run(EngineOptions::DeviceSampling::kOn, &device_preemptions);
  EXPECT_GT(device_preemptions, 0);
  EXPECT_EQ(device_preemptions, host_preemptions);
  ASSERT_EQ(host.size(), 4u);
  for (const auto& t : host) EXPECT_EQ(t.size(), 24u);
  EXPECT_EQ(device, host);
}

TEST(EngineTest, StopStringAndStopTokenEndWithTheirReason) {
  EngineOptions options = SmallEngineOptions(64, 4);
  options.tokenizer = &DefaultTokenizer();
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  GenerateRequest base;
  base.prompt_text = "ROMEO:\nBut soft, what light";
  base.sampling.temperature = 0.0f;
  base.sampling.max_new_tokens = 40;
  base.sampling.ignore_eos = true;
  auto full = RunToEnd(**engine, base);
  const std::vector<int32_t> ids = full->token_ids();
  ASSERT_EQ(ids.size(), 40u);
  EXPECT_EQ(full->final_event().finish_reason, FinishReason::kLength);
  auto decoded = DefaultTokenizer().Decode(ids, /*skip_special_tokens=*/true);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(full->text(), *decoded);
  const std::string text = *decoded;
  ASSERT_GE(text.size(), 12u);

  // A stop string from the middle of the text: the output is the text before
  // its first occurrence.
  const std::string stop = text.substr(text.size() / 2, 3);
  GenerateRequest with_stop = base;
  with_stop.sampling.stop_strings = {"never appears", stop};
  auto stopped = RunToEnd(**engine, with_stop);
  TokenEvent last = stopped->final_event();
  EXPECT_EQ(last.finish_reason, FinishReason::kStopString);
  EXPECT_EQ(last.matched_stop_string, stop);
  EXPECT_EQ(stopped->text(), text.substr(0, text.find(stop)));
  EXPECT_LT(stopped->token_ids().size(), ids.size());

  with_stop.sampling.include_stop_string_in_output = true;
  EXPECT_EQ(RunToEnd(**engine, with_stop)->text(),
            text.substr(0, text.find(stop) + stop.size()));

  // A stop token id: generation ends on it, its text is not emitted.
  GenerateRequest with_token = base;
  with_token.sampling.stop_token_ids = {ids[5]};
  size_t first = 0;
  while (ids[first] != ids[5]) ++first;
  auto token_stopped = RunToEnd(**engine, with_token);
  last = token_stopped->final_event();
  EXPECT_EQ(last.finish_reason, FinishReason::kStopToken);
  EXPECT_EQ(last.matched_token_id, ids[5]);
  const std::vector<int32_t> prefix(ids.begin(), ids.begin() + first + 1);
  EXPECT_EQ(token_stopped->token_ids(), prefix);
  EXPECT_EQ(last.usage.num_generated_tokens, static_cast<int64_t>(first + 1));
  auto before =
      DefaultTokenizer().Decode(absl::MakeConstSpan(ids.data(), first), true);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(token_stopped->text(), *before);
  EXPECT_GT(last.usage.num_prompt_tokens, 0);
  EXPECT_GE(last.timing.total_seconds, last.timing.time_to_first_token_seconds);
  EXPECT_GE(last.timing.time_to_first_token_seconds, last.timing.queue_seconds);
}
// The model's EOS ids (from generation_config.json) end generation with
// kStop unless ignore_eos. A copy of the default model whose EOS id is a token
// greedy generation produces.
TEST(EngineTest, EosEndsWithStop) {
  auto engine = Engine::Create(SmallEngineOptions(64, 4));
  ASSERT_TRUE(engine.ok());
  const std::vector<int32_t> prompt = Encode(Prompts()[0]);
  const std::vector<int32_t> ids =
      RunToEnd(**engine, Greedy(prompt, 12))->token_ids();
  ASSERT_EQ(ids.size(), 12u);
  const int32_t eos = ids[4];
  size_t first = 0;
  while (ids[first] != eos) ++first;

  const std::string dir = ::testing::TempDir() + "/engine_test_eos_model";
  const std::string src = testing_util::DefaultModelDir();
  ASSERT_EQ(
      std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "' && cp '" +
                   src + "/config.json' '" + src + "/tokenizer.json' '" + src +
                   "/tokenizer_config.json' '" + dir + "/' && ln -s '" + src +
                   "/model.safetensors' '" + dir + "/'")
                      .c_str()),
      0);
  {
    std::ofstream out(dir + "/generation_config.json");
    out << "{\"eos_token_id\": [" << eos << "]}";
  }
  EngineOptions options = SmallEngineOptions(64, 4);
  options.model = nullptr;
  options.model_dir = dir;
  options.load_tokenizer = true;
  auto eos_engine = Engine::Create(options);
  ASSERT_TRUE(eos_engine.ok()) << eos_engine.status();
  GenerateRequest r = Greedy(prompt, 12);
  r.sampling.ignore_eos = false;
  auto sink = RunToEnd(**eos_engine, r);
  TokenEvent last = sink->final_event();
  EXPECT_EQ(last.finish_reason, FinishReason::kStop);
  EXPECT_EQ(last.matched_token_id, eos);
  EXPECT_EQ(sink->token_ids(),
            std::vector<int32_t>(ids.begin(), ids.begin() + first + 1));
  auto before =
      DefaultTokenizer().Decode(absl::MakeConstSpan(ids.data(), first), true);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(sink->text(), *before);
  // ignore_eos generates through it.
  r.sampling.ignore_eos = true;
  auto through = RunToEnd(**eos_engine, r);
  EXPECT_EQ(through->final_event().finish_reason, FinishReason::kLength);
  EXPECT_EQ(through->token_ids(), ids);
}

}  // namespace
}  // namespace tributary

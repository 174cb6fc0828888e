// The residual telemetry of a request (design.md §4) through the engine:
// the per-token trace and the per-request summary, with chunked prefills,
// batching and preemption.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "engine/runtime/engine.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/engine_test_util.h"

namespace tributary {
namespace {

using testing_util::DefaultModel;
using testing_util::RecordingSink;
using testing_util::SmallEngineOptions;

constexpr int32_t kMaxNew = 12;

GenerateRequest Traced(const std::string& text) {
  GenerateRequest request =
      testing_util::Greedy(testing_util::Encode(text), kMaxNew);
  request.residual_trace = true;
  request.residual_summary = true;
  return request;
}

struct StepObserver : EngineObserver {
  void OnStep(const StepStats& stats) override { tokens += stats.num_tokens; }
  void OnResidualStats(const ResidualSummary& step,
                       int64_t num_intervened_tokens) override {
    residual_tokens +=
        step.sublayers.at(0).num_tokens + step.sublayers.at(0).num_nonfinite;
    intervened_tokens += num_intervened_tokens;
  }
  int64_t tokens = 0;
  int64_t residual_tokens = 0;
  int64_t intervened_tokens = 0;
};

std::vector<ResidualTraceToken> Trace(const RecordingSink& sink) {
  std::vector<ResidualTraceToken> trace;
  for (const TokenEvent& e : sink.events()) {
    trace.insert(trace.end(), e.residual_trace.begin(), e.residual_trace.end());
  }
  return trace;
}

const std::vector<std::string> kPrompts = {
    "ROMEO:\nBut soft, what light through yonder window breaks",
    "JULIET:\nO",
    "KING RICHARD:\nNow is the winter of our discontent, made glorious summer",
    "HAMLET:\nTo be, or not to be",
};

TEST(EngineResidualTest, TraceCoversEveryPositionOnceAndSummaryAgrees) {
  const int num_layers =
      static_cast<int>(DefaultModel().config().num_hidden_layers);
  // Alone, with room, then four at once in a pool small enough to preempt.
  std::vector<std::vector<ResidualTraceToken>> alone;
  {
    EngineOptions options = SmallEngineOptions(64, 4);
    options.residual_stats = true;
    auto engine = Engine::Create(options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    for (const std::string& p : kPrompts) {
      auto sink = std::make_shared<RecordingSink>();
      ASSERT_TRUE((*engine)->Submit(Traced(p), sink).ok());
      ASSERT_TRUE(sink->WaitFinal(testing_util::kHangGuard));
      alone.push_back(Trace(*sink));
    }
  }
  EngineOptions options = SmallEngineOptions(5, 4);
  options.residual_stats = true;
  options.scheduler.max_tokens_per_step = 16;  // chunked prefills
  StepObserver observer;
  options.observer = &observer;
  // The first forward waits until all four are submitted, so that they
  // overlap (and the small pool preempts) however the threads are
  // scheduled on a loaded machine.
  testing_util::StartGate gate;
  options.fault_hook = gate.Hook();
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (const std::string& p : kPrompts) {
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE((*engine)->Submit(Traced(p), sinks.back()).ok());
  }
  gate.Open();
  for (size_t i = 0; i < sinks.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(sinks[i]->WaitFinal(testing_util::kHangGuard));
    const TokenEvent final_event = sinks[i]->final_event();
    ASSERT_TRUE(final_event.status.ok()) << final_event.status;
    // The last generated token is never run through the model.
    const int64_t processed = final_event.usage.num_prompt_tokens +
                              final_event.usage.num_generated_tokens - 1;
    const std::vector<ResidualTraceToken> trace = Trace(*sinks[i]);
    ASSERT_EQ(static_cast<int64_t>(trace.size()), processed);
    for (int64_t t = 0; t < processed; ++t) {
      const ResidualTraceToken& token = trace[static_cast<size_t>(t)];
      ASSERT_EQ(token.position, t);
      ASSERT_EQ(token.norms.size(), static_cast<size_t>(6 * num_layers));
      // Each sublayer's sum is the next one's stream (the same vector).
      for (int s = 0; s + 1 < 2 * num_layers; ++s) {
        EXPECT_FLOAT_EQ(token.norms[3 * s + 2], token.norms[3 * (s + 1)])
            << "position " << t << " sublayer " << s;
      }
      // The same as the request run alone, up to rounding: batching is
      // bit-exact, but where the delta rule takes its chunked form (heads
      // too large for L1: not the default model's, delta_rule.h), chunk
      // boundaries (other requests share the step's token budget) change
      // its summation order.
      const std::vector<float>& ref = alone[i][static_cast<size_t>(t)].norms;
      for (size_t k = 0; k < ref.size(); ++k) {
        ASSERT_NEAR(token.norms[k], ref[k], 1e-4f * (1.0f + ref[k]))
            << "position " << t << " value " << k;
      }
    }
    ASSERT_TRUE(final_event.residual_summary.has_value());
    const ResidualSummary& summary = *final_event.residual_summary;
    ASSERT_EQ(summary.num_layers(), num_layers);
    EXPECT_EQ(summary.num_final_tokens, processed);
    for (int s = 0; s < 2 * num_layers; ++s) {
      const SublayerAccumulator& a = summary.sublayers[static_cast<size_t>(s)];
      EXPECT_EQ(a.num_tokens, processed);
      EXPECT_EQ(a.num_nonfinite, 0);
      double ratio_sum = 0.0;
      for (const ResidualTraceToken& token : trace) {
        ratio_sum += token.norms[3 * s + 1] /
                     std::max(token.norms[3 * s], kMinStreamNorm);
      }
      EXPECT_NEAR(a.mean_ratio(), ratio_sum / processed,
                  1e-5 * std::abs(a.mean_ratio()));
      EXPECT_GE(a.max_abs_dim, 0);
      EXPECT_LT(a.max_abs_dim, DefaultModel().config().hidden_size);
    }
  }
  EXPECT_GT((*engine)->counts().num_preemptions, 0);
  (*engine)->Shutdown(absl::Now());
  // The observer saw every token the steps processed.
  EXPECT_EQ(observer.residual_tokens, observer.tokens);
}

// The observer's statistics are the model's health: a request that skips a
// layer or steers the stream, batched with a plain one, adds nothing to
// them (its tokens are counted as intervened), while its own summary still
// covers every token it processed.
TEST(EngineResidualTest, InterventionsStayOutOfTheModelHealthStats) {
  testing_util::StartGate gate;
  StepObserver observer;
  EngineOptions options = SmallEngineOptions(64, 4);
  options.residual_stats = true;
  options.observer = &observer;
  options.fault_hook = gate.Hook();
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const int64_t hidden = DefaultModel().config().hidden_size;
  GenerateRequest plain = Traced(kPrompts[0]);
  GenerateRequest skipping = Traced(kPrompts[1]);
  skipping.skip_layers = {2};
  GenerateRequest steering = Traced(kPrompts[2]);
  steering.steering.push_back(
      {3, true, std::vector<float>(static_cast<size_t>(hidden), 1.0f), 50.0f,
       false});
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (GenerateRequest* r : {&plain, &skipping, &steering}) {
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE((*engine)->Submit(std::move(*r), sinks.back()).ok());
  }
  gate.Open();
  std::vector<int64_t> processed;
  for (auto& sink : sinks) {
    ASSERT_TRUE(sink->WaitFinal(testing_util::kHangGuard));
    const TokenEvent final_event = sink->final_event();
    ASSERT_TRUE(final_event.status.ok()) << final_event.status;
    ASSERT_TRUE(final_event.residual_summary.has_value());
    processed.push_back(final_event.residual_summary->num_final_tokens);
    EXPECT_EQ(processed.back(), final_event.usage.num_prompt_tokens +
                                    final_event.usage.num_generated_tokens - 1);
  }
  (*engine)->Shutdown(absl::Now());
  EXPECT_EQ(observer.residual_tokens, processed[0]);
  EXPECT_EQ(observer.intervened_tokens, processed[1] + processed[2]);
  EXPECT_EQ(observer.tokens, processed[0] + processed[1] + processed[2]);
}

TEST(EngineResidualTest, NothingWhenNotAsked) {
  EngineOptions options = SmallEngineOptions(64, 4);
  options.residual_stats = true;
  auto engine = Engine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  GenerateRequest request = Traced(kPrompts[0]);
  request.residual_trace = false;
  request.residual_summary = false;
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE((*engine)->Submit(std::move(request), sink).ok());
  ASSERT_TRUE(sink->WaitFinal(testing_util::kHangGuard));
  EXPECT_TRUE(Trace(*sink).empty());
  EXPECT_FALSE(sink->final_event().residual_summary.has_value());
}

}  // namespace
}  // namespace tributary

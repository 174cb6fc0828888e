// Per-request interventions on the residual stream through the engine:
// validation naming the field, logit-lens readings on every generated token,
// and mixed batches (each request's output equals its output alone).
#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "engine/runtime/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/engine_test_util.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;
using testing_util::DefaultModel;
using testing_util::RecordingSink;
using testing_util::SmallEngineOptions;


int64_t Hidden() { return DefaultModel().config().hidden_size; }
int32_t Layers() {
  return static_cast<int32_t>(DefaultModel().config().num_hidden_layers);
}

std::vector<float> Random(uint32_t seed, float norm) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(Hidden()));
  double sq = 0.0;
  for (float& x : v) {
    x = normal(rng);
    sq += static_cast<double>(x) * x;
  }
  for (float& x : v) x = static_cast<float>(x * norm / std::sqrt(sq));
  return v;
}

GenerateRequest Greedy(const std::string& text, int32_t max_new_tokens) {
  return testing_util::Greedy(testing_util::Encode(text), max_new_tokens);
}

std::vector<LensReading> Lens(const RecordingSink& sink) {
  std::vector<LensReading> all;
  for (const TokenEvent& e : sink.events()) {
    all.insert(all.end(), e.logit_lens.begin(), e.logit_lens.end());
  }
  return all;
}

TEST(EngineInterventionsTest, ValidationNamesTheField) {
  auto engine = Engine::Create(SmallEngineOptions(64, 4));
  ASSERT_TRUE(engine.ok()) << engine.status();
  struct Case {
    std::function<void(GenerateRequest&)> mutate;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](auto& r) {
         r.steering.push_back({0, true, {1.0f, 2.0f}, 1.0f, false});
       },
       "steering[0].vector has 2 values"},
      {[](auto& r) {
         r.steering.push_back({99, true, Random(1, 1), 1.0f, false});
       },
       "steering[0].layer = 99"},
      {[](auto& r) {
         auto v = Random(1, 1);
         v[7] = NAN;
         r.steering.push_back({0, true, v, 1.0f, false});
       },
       "steering[0].vector[7]"},
      {[](auto& r) {
         r.steering.push_back({0, true, Random(1, 1), INFINITY, false});
       },
       "steering[0].scale"},
      // Finite scale and vector whose product overflows float32 (or comes
      // near it): the stream would fill with Inf and NaN.
      {[](auto& r) {
         r.steering.push_back(
             {0, true, std::vector<float>(static_cast<size_t>(Hidden()), 1.0f),
              3e38f, false});
       },
       "steering[0].scale = 3e+38 times steering[0].vector[0]"},
      {[](auto& r) {
         r.steering.push_back(
             {0, true, std::vector<float>(static_cast<size_t>(Hidden()), 2.0f),
              1e6f, false});
       },
       "beyond"},
      {[](auto& r) {
         for (int i = 0; i < 17; ++i)
           r.steering.push_back({0, true, Random(1, 1), 1.0f, false});
       },
       "steering has 17"},
      {[](auto& r) {
         r.ablate.push_back(
             std::vector<float>(static_cast<size_t>(Hidden()), 0.0f));
       },
       "ablate[0] has no direction"},
      {[](auto& r) { r.ablate.push_back({1.0f}); }, "ablate[0] has 1 values"},
      {[](auto& r) {
         r.skip_layers = {1, 1};
       },
       "skip_layers[1] = 1 is repeated"},
      {[](auto& r) { r.skip_layers = {-1}; }, "skip_layers[0] = -1"},
      {[](auto& r) {
         r.logit_lens = LogitLensOptions{{0, 8}, 5, false};
       },
       "logit_lens.layers[1] = 8"},
      {[](auto& r) {
         r.logit_lens = LogitLensOptions{{}, 0, false};
       },
       "logit_lens.top_n = 0"},
  };
  for (const Case& c : cases) {
    GenerateRequest r = Greedy("ROMEO:", 4);
    c.mutate(r);
    auto id =
        (*engine)->Submit(std::move(r), std::make_shared<RecordingSink>());
    ASSERT_FALSE(id.ok()) << c.field;
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(id.status().message()), HasSubstr(c.field));
  }
}

TEST(EngineInterventionsTest, LensReadsEveryGeneratedTokenAndAgreesAtTheTop) {
  auto engine = Engine::Create(SmallEngineOptions(64, 4));
  ASSERT_TRUE(engine.ok()) << engine.status();
  GenerateRequest r = Greedy("JULIET:\nO Romeo", 6);
  r.logit_lens = LogitLensOptions{{}, 3, false};
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE((*engine)->Submit(std::move(r), sink).ok());
  ASSERT_TRUE(sink->WaitFinal(testing_util::kHangGuard));
  const std::vector<int32_t> tokens = sink->token_ids();
  const std::vector<LensReading> lens = Lens(*sink);
  ASSERT_EQ(lens.size(), tokens.size() * static_cast<size_t>(Layers()));
  for (size_t i = 0; i < tokens.size(); ++i) {
    for (int32_t l = 0; l < Layers(); ++l) {
      const LensReading& reading = lens[i * static_cast<size_t>(Layers()) + l];
      EXPECT_EQ(reading.layer, l);
      ASSERT_EQ(reading.top.size(), 3u);
      if (l == Layers() - 1) {
        // At the last layer the lens is the model: its top token is the
        // greedy choice.
        EXPECT_EQ(reading.top[0].token_id, tokens[i]) << "token " << i;
      }
    }
  }
}

TEST(EngineInterventionsTest, MixedBatchesEqualRunsAlone) {
  std::vector<GenerateRequest> requests;
  const std::vector<std::string> prompts = {
      "ROMEO:\nBut soft", "KING RICHARD:\nNow is the winter", "JULIET:\nO",
      "HAMLET:\nTo be, or not to be", "First Citizen:\nBefore we proceed"};
  for (const std::string& p : prompts) requests.push_back(Greedy(p, 12));
  requests[0].steering.push_back({3, true, Random(11, 8.0f), 1.0f, false});
  requests[1].ablate.push_back(Random(12, 1.0f));
  requests[1].logit_lens = LogitLensOptions{{2, 5}, 4, true};
  requests[2].skip_layers = {1, 6};
  requests[3].steering.push_back({5, false, Random(13, 6.0f), -1.5f, true});
  // requests[4]: plain.
  // The batched run must prefill all five in its first step: on CUDA a
  // decode sharing a step with a prefill takes cuBLAS instead of the
  // few-token kernel (other sums, other bits), so when the engine thread
  // picks the first request up alone (a loaded machine), the run is redone.
  class FirstStep : public EngineObserver {
   public:
    void OnStep(const StepStats& stats) override {
      int64_t unset = -1;
      sequences.compare_exchange_strong(unset, stats.num_sequences);
    }
    std::atomic<int64_t> sequences{-1};
  };
  auto run = [&](const std::vector<size_t>& which, bool together) {
    std::vector<std::shared_ptr<RecordingSink>> sinks(requests.size());
    for (int attempt = 0; attempt < 20; ++attempt) {
      FirstStep first;
      EngineOptions options = SmallEngineOptions(64, 8);
      options.observer = &first;
      auto engine = Engine::Create(options);
      EXPECT_TRUE(engine.ok());
      for (size_t i : which) {
        sinks[i] = std::make_shared<RecordingSink>();
        EXPECT_TRUE((*engine)->Submit(requests[i], sinks[i]).ok());
        if (!together) {
          EXPECT_TRUE(sinks[i]->WaitFinal(testing_util::kHangGuard));
        }
      }
      for (size_t i : which) EXPECT_TRUE(sinks[i]->WaitFinal(testing_util::kHangGuard));
      (*engine)->Shutdown(absl::InfinitePast());
      if (!together || first.sequences == static_cast<int64_t>(which.size())) break;
    }
    return sinks;
  };
  const auto alone = run({0, 1, 2, 3, 4}, false);
  const auto batched = run({0, 1, 2, 3, 4}, true);
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(batched[i]->token_ids(), alone[i]->token_ids());
    const auto a = Lens(*alone[i]);
    const auto b = Lens(*batched[i]);
    ASSERT_EQ(a.size(), b.size());
    for (size_t j = 0; j < a.size(); ++j) {
      EXPECT_EQ(a[j].position, b[j].position);
      EXPECT_EQ(a[j].layer, b[j].layer);
      ASSERT_EQ(a[j].top.size(), b[j].top.size());
      for (size_t k = 0; k < a[j].top.size(); ++k) {
        EXPECT_EQ(a[j].top[k].token_id, b[j].top[k].token_id);
        EXPECT_EQ(a[j].top[k].logprob, b[j].top[k].logprob);
      }
    }
  }
  // The interventions did something: steering changed request 0's output
  // compared with the plain run of the same prompt.
  std::vector<GenerateRequest> plain = {Greedy(prompts[0], 12)};
  auto engine = Engine::Create(SmallEngineOptions(64, 8));
  ASSERT_TRUE(engine.ok());
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE((*engine)->Submit(plain[0], sink).ok());
  ASSERT_TRUE(sink->WaitFinal(testing_util::kHangGuard));
  EXPECT_NE(sink->token_ids(), alone[0]->token_ids());
  // With include_prompt, request 1 read every prompt position too.
  EXPECT_EQ(Lens(*alone[1]).size(),
            2 * (requests[1].prompt_ids.size() + 12 - 1));
}

}  // namespace
}  // namespace tributary

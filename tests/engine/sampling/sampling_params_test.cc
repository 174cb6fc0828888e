#include "engine/sampling/sampling_params.h"

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(SamplingParamsTest, DefaultsAreValidAndNeutral) {
  SamplingParams params;
  EXPECT_TRUE(params.Validate().ok());
  EXPECT_EQ(params.temperature, 1.0f);
  EXPECT_FALSE(params.is_greedy());
  EXPECT_FALSE(params.has_penalties());
  EXPECT_FALSE(params.include_stop_string_in_output);
}

struct BadCase {
  std::string name;
  std::function<void(SamplingParams*)> mutate;
  std::string field;  // the message must contain it
  std::string value;  // ... and this
};

TEST(SamplingParamsTest, EveryErrorNamesTheFieldAndValue) {
  const std::vector<BadCase> cases = {
      {"negative temperature", [](auto* p) { p->temperature = -1; },
       "temperature = -1", "[0, 100]"},
      {"huge temperature", [](auto* p) { p->temperature = 1000; },
       "temperature = 1000", "100"},
      {"nan temperature", [](auto* p) { p->temperature = NAN; },
       "temperature = nan", "[0"},
      {"negative top_k", [](auto* p) { p->top_k = -2; }, "top_k = -2", ">= 0"},
      {"zero top_p", [](auto* p) { p->top_p = 0; }, "top_p = 0", "(0, 1]"},
      {"top_p over 1", [](auto* p) { p->top_p = 1.5; }, "top_p = 1.5",
       "(0, 1]"},
      {"negative min_p", [](auto* p) { p->min_p = -0.1f; }, "min_p = -0.1",
       "[0, 1]"},
      {"min_p over 1", [](auto* p) { p->min_p = 2; }, "min_p = 2", "[0, 1]"},
      {"zero repetition_penalty", [](auto* p) { p->repetition_penalty = 0; },
       "repetition_penalty = 0", "(0, 100]"},
      {"negative repetition_penalty",
       [](auto* p) { p->repetition_penalty = -1; }, "repetition_penalty = -1",
       "(0"},
      {"presence_penalty", [](auto* p) { p->presence_penalty = 2.5; },
       "presence_penalty = 2.5", "[-2, 2]"},
      {"frequency_penalty", [](auto* p) { p->frequency_penalty = -3; },
       "frequency_penalty = -3", "[-2, 2]"},
      {"num_logprobs over", [](auto* p) { p->num_logprobs = 21; },
       "num_logprobs = 21", "[0, 20]"},
      {"num_logprobs negative", [](auto* p) { p->num_logprobs = -1; },
       "num_logprobs = -1", "[0, 20]"},
      {"max_new_tokens", [](auto* p) { p->max_new_tokens = 0; },
       "max_new_tokens = 0", ">= 1"},
      {"stop_token_ids negative",
       [](auto* p) {
         p->stop_token_ids = {3, -4};
       },
       "stop_token_ids[1] = -4", ">= 0"},
      {"too many stop_token_ids",
       [](auto* p) { p->stop_token_ids.assign(65, 1); }, "stop_token_ids",
       "65"},
      {"empty stop string",
       [](auto* p) {
         p->stop_strings = {"a", ""};
       },
       "stop_strings[1]", "empty"},
      {"long stop string",
       [](auto* p) { p->stop_strings = {std::string(257, 'x')}; },
       "stop_strings[0]", "257 bytes"},
      {"bad utf8 stop string",
       [](auto* p) {
         p->stop_strings = {"ok", "a\xC3"};
       },
       "stop_strings[1]", "UTF-8"},
      {"too many stop strings",
       [](auto* p) { p->stop_strings.assign(17, "x"); }, "stop_strings", "17"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    SamplingParams params;
    c.mutate(&params);
    const absl::Status status = params.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr(c.field), HasSubstr(c.value)));
  }
}

TEST(SamplingParamsTest, BoundaryValuesAreValid) {
  SamplingParams params;
  params.temperature = 0;
  params.top_p = 1;
  params.min_p = 1;
  params.presence_penalty = -2;
  params.frequency_penalty = 2;
  params.repetition_penalty = 100;
  params.num_logprobs = 20;
  params.max_new_tokens = 1;
  params.stop_strings.assign(16, std::string(256, 'x'));
  params.stop_token_ids.assign(64, 0);
  EXPECT_TRUE(params.Validate().ok()) << params.Validate();
  EXPECT_TRUE(params.is_greedy());
  params.temperature = 1e-6f;  // below the greedy threshold
  EXPECT_TRUE(params.is_greedy());
}

TEST(SamplingParamsTest, StopTokenIdsMustBeInTheVocabulary) {
  SamplingParams params;
  params.stop_token_ids = {5, 10};
  EXPECT_TRUE(params.ValidateTokenIds(11).ok());
  const absl::Status status = params.ValidateTokenIds(10);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("stop_token_ids[1] = 10 is outside the vocabulary"));
}

}  // namespace
}  // namespace tributary

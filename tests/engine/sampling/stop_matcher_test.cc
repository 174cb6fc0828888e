#include "engine/sampling/stop_matcher.h"

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kEos = 7;
constexpr int32_t kText = 100;  // an ordinary token id

StopMatcher MakeMatcher(const SamplingParams& params,
                        int32_t max_new_tokens = 1000) {
  const std::vector<int32_t> eos = {kEos, 8};
  absl::StatusOr<StopMatcher> matcher =
      StopMatcher::Create(params, eos, max_new_tokens);
  EXPECT_TRUE(matcher.ok()) << matcher.status();
  return std::move(matcher).value();
}

StopDecision AddOrDie(StopMatcher& matcher, absl::string_view delta,
                      int32_t id = kText) {
  absl::StatusOr<StopDecision> decision = matcher.Add(id, delta);
  EXPECT_TRUE(decision.ok()) << decision.status();
  return decision.ok() ? *decision : StopDecision{};
}

struct FedRun {
  std::vector<std::string> emitted;  // per token
  std::string text;                  // concatenated
  StopDecision last;
};

// Feeds text tokens until one finishes the sequence.
FedRun Feed(StopMatcher& matcher, const std::vector<std::string>& deltas) {
  FedRun run;
  for (const std::string& delta : deltas) {
    run.last = AddOrDie(matcher, delta);
    run.emitted.push_back(run.last.text);
    run.text += run.last.text;
    if (run.last.finish.has_value()) break;
  }
  return run;
}

SamplingParams WithStops(std::vector<std::string> stops, bool include = false) {
  SamplingParams params;
  params.stop_strings = std::move(stops);
  params.include_stop_string_in_output = include;
  return params;
}

TEST(StopMatcherTest, StopStringSplitAcrossTokensIsCutAndNeverStreamed) {
  StopMatcher matcher = MakeMatcher(WithStops({"<|im_end|>"}));
  const FedRun run =
      Feed(matcher, {"Hello", " world", "<|", "im_end|>", "tail"});
  EXPECT_THAT(run.emitted,
              testing::ElementsAre("Hello", " world", "", ""));  // "<|" held
  EXPECT_EQ(run.text, "Hello world");
  EXPECT_EQ(run.last.finish, FinishReason::kStopString);
  EXPECT_EQ(run.last.matched_stop_string, 0);
  EXPECT_TRUE(matcher.finished());
  EXPECT_EQ(matcher.num_generated_tokens(), 4);
}

TEST(StopMatcherTest, IncludeStopStringInOutput) {
  StopMatcher matcher = MakeMatcher(WithStops({"<|im_end|>"}, true));
  const FedRun run = Feed(matcher, {"Hi", "<", "|im", "_end", "|>after"});
  EXPECT_EQ(run.text, "Hi<|im_end|>");
  EXPECT_EQ(run.last.finish, FinishReason::kStopString);
}

TEST(StopMatcherTest, HeldTextIsReleasedWhenTheMatchFails) {
  StopMatcher matcher = MakeMatcher(WithStops({"<|im_end|>"}));
  StopDecision d = AddOrDie(matcher, "a<");
  EXPECT_EQ(d.text, "a");
  EXPECT_EQ(matcher.num_held_bytes(), 1u);
  d = AddOrDie(matcher, "|im");
  EXPECT_EQ(d.text, "");
  EXPECT_EQ(matcher.num_held_bytes(), 4u);
  d = AddOrDie(matcher, "x");
  EXPECT_EQ(d.text, "<|imx");
  EXPECT_EQ(matcher.num_held_bytes(), 0u);
  EXPECT_FALSE(d.finish.has_value());
}

TEST(StopMatcherTest, OverlappingPrefixes) {
  {
    StopMatcher matcher = MakeMatcher(WithStops({"abc"}));
    const FedRun run = Feed(matcher, {"a", "b", "a", "b", "c"});
    EXPECT_THAT(run.emitted, testing::ElementsAre("", "", "ab", "", ""));
    EXPECT_EQ(run.text, "ab");
    EXPECT_EQ(run.last.finish, FinishReason::kStopString);
  }
  {
    StopMatcher matcher = MakeMatcher(WithStops({"abc"}));
    const FedRun run = Feed(matcher, {"ababc"});
    EXPECT_EQ(run.text, "ab");
  }
  {
    // "aab" in "aaab": the failure links must fall back to "aa", not 0.
    StopMatcher matcher = MakeMatcher(WithStops({"aab"}));
    const FedRun run = Feed(matcher, {"a", "a", "a", "b"});
    EXPECT_EQ(run.text, "a");
    EXPECT_EQ(run.last.finish, FinishReason::kStopString);
  }
}

TEST(StopMatcherTest, MultiByteCharactersAcrossTokens) {
  // StreamDecoder emits "" for a token that ends inside a character, then the
  // whole character.
  StopMatcher matcher = MakeMatcher(WithStops({"é!"}));
  FedRun run = Feed(matcher, {"caf", "", "é", "!", "more"});
  EXPECT_THAT(run.emitted, testing::ElementsAre("caf", "", "", ""));
  EXPECT_EQ(run.text, "caf");

  // Held text is whole characters: "é" held, then released when "é" follows.
  StopMatcher other = MakeMatcher(WithStops({"éa"}));
  run = Feed(other, {"é", "é", "b"});
  EXPECT_THAT(run.emitted, testing::ElementsAre("", "é", "éb"));

  // A stop string of emoji (4-byte characters) split across tokens.
  StopMatcher emoji = MakeMatcher(WithStops({"🙂🙂"}));
  run = Feed(emoji, {"ok ", "🙂", "", "🙂", "x"});
  EXPECT_EQ(run.text, "ok ");
  EXPECT_EQ(run.last.finish, FinishReason::kStopString);
}

TEST(StopMatcherTest, EarliestEndingStopStringWinsThenLongest) {
  {
    StopMatcher matcher = MakeMatcher(WithStops({"abcd", "bc"}));
    const FedRun run = Feed(matcher, {"xabcd"});
    EXPECT_EQ(run.text, "xa");
    EXPECT_EQ(run.last.matched_stop_string, 1);
  }
  {
    StopMatcher matcher = MakeMatcher(WithStops({"c", "abc"}));
    const FedRun run = Feed(matcher, {"xab", "c"});
    EXPECT_EQ(run.text, "x");
    EXPECT_EQ(run.last.matched_stop_string, 1);
  }
  {
    StopMatcher matcher = MakeMatcher(WithStops({"END"}));
    const FedRun run = Feed(matcher, {"fooENDbar"});
    EXPECT_EQ(run.text, "foo");  // text after the match is dropped
  }
}

TEST(StopMatcherTest, EosStopsUnlessIgnored) {
  StopMatcher matcher = MakeMatcher(WithStops({"<|x"}));
  EXPECT_EQ(AddOrDie(matcher, "hi <").text, "hi ");
  const StopDecision d = AddOrDie(matcher, "<|endoftext|>", kEos);
  EXPECT_EQ(d.finish, FinishReason::kStop);
  EXPECT_EQ(d.matched_token_id, kEos);
  EXPECT_EQ(d.text, "<");  // held text released, EOS text not emitted

  SamplingParams params;
  params.ignore_eos = true;
  StopMatcher ignoring = MakeMatcher(params);
  const StopDecision e = AddOrDie(ignoring, "<eos>", kEos);
  EXPECT_FALSE(e.finish.has_value());
  EXPECT_EQ(e.text, "<eos>");
}

TEST(StopMatcherTest, StopTokenIdsStopEvenWithIgnoreEos) {
  SamplingParams params;
  params.ignore_eos = true;
  params.stop_token_ids = {42};
  StopMatcher matcher = MakeMatcher(params);
  EXPECT_FALSE(AddOrDie(matcher, "a").finish.has_value());
  const StopDecision d = AddOrDie(matcher, "<tool>", 42);
  EXPECT_EQ(d.finish, FinishReason::kStopToken);
  EXPECT_EQ(d.matched_token_id, 42);
  EXPECT_EQ(d.text, "");
}

TEST(StopMatcherTest, LengthFlushesHeldText) {
  StopMatcher matcher = MakeMatcher(WithStops({"xyz"}), 3);
  const FedRun run = Feed(matcher, {"a", "b", "x", "never"});
  EXPECT_THAT(run.emitted, testing::ElementsAre("a", "b", "x"));
  EXPECT_EQ(run.last.finish, FinishReason::kLength);
  EXPECT_EQ(matcher.num_generated_tokens(), 3);
}

TEST(StopMatcherTest, StopStringOnTheLastAllowedTokenWinsOverLength) {
  StopMatcher matcher = MakeMatcher(WithStops({"!"}), 2);
  const FedRun run = Feed(matcher, {"a", "b!"});
  EXPECT_EQ(run.last.finish, FinishReason::kStopString);
  EXPECT_EQ(run.text, "ab");
}

TEST(StopMatcherTest, AddAfterFinishAndFlush) {
  StopMatcher matcher = MakeMatcher(SamplingParams(), 1);
  EXPECT_EQ(AddOrDie(matcher, "a").finish, FinishReason::kLength);
  EXPECT_EQ(matcher.Add(kText, "b").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(matcher.Flush(), "");

  StopMatcher cancelled = MakeMatcher(WithStops({"abc"}));
  EXPECT_EQ(AddOrDie(cancelled, "xab").text, "x");
  EXPECT_EQ(cancelled.Flush(), "ab");
  EXPECT_TRUE(cancelled.finished());
  EXPECT_EQ(cancelled.Add(kText, "c").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(StopMatcherTest, CreateValidates) {
  SamplingParams params;
  params.stop_strings = {""};
  absl::StatusOr<StopMatcher> bad = StopMatcher::Create(params, {}, 10);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("stop_strings[0]"));
  bad = StopMatcher::Create(SamplingParams(), {}, 0);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("max_new_tokens = 0"));
}

TEST(StopMatcherTest, FinishReasonNames) {
  EXPECT_EQ(FinishReasonName(FinishReason::kLength), "length");
  EXPECT_EQ(FinishReasonName(FinishReason::kStop), "stop");
  EXPECT_EQ(FinishReasonName(FinishReason::kStopToken), "stop_token");
  EXPECT_EQ(FinishReasonName(FinishReason::kStopString), "stop_string");
  EXPECT_EQ(FinishReasonName(FinishReason::kCancelled), "cancelled");
}

// Randomized against the naive rule on the whole text: cut at the earliest
// end of any stop string (longest on a tie), however the text is split into
// tokens; and no streamed prefix ever goes past the cut.
TEST(StopMatcherTest, RandomSplitsMatchTheNaiveRule) {
  std::mt19937 rng(5);
  auto random_string = [&](int min_len, int max_len) {
    std::string s(std::uniform_int_distribution<int>(min_len, max_len)(rng),
                  'a');
    for (char& c : s) c = "abc"[std::uniform_int_distribution<int>(0, 2)(rng)];
    return s;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::string> stops;
    const int num_stops = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int i = 0; i < num_stops; ++i) stops.push_back(random_string(1, 4));
    const std::string text = random_string(0, 30);
    const bool include = trial % 2 == 1;

    // The naive answer.
    size_t best_end = std::string::npos, best_len = 0;
    for (size_t end = 1; end <= text.size() && best_end == std::string::npos;
         ++end) {
      for (const std::string& stop : stops) {
        if (stop.size() <= end &&
            text.compare(end - stop.size(), stop.size(), stop) == 0 &&
            stop.size() > best_len) {
          best_end = end;
          best_len = stop.size();
        }
      }
    }
    const std::string want =
        best_end == std::string::npos
            ? text
            : text.substr(0, include ? best_end : best_end - best_len);

    // Split into random tokens (possibly empty ones).
    std::vector<std::string> deltas;
    for (size_t pos = 0; pos < text.size();) {
      const size_t len = std::uniform_int_distribution<size_t>(
          0, std::min<size_t>(5, text.size() - pos))(rng);
      deltas.push_back(text.substr(pos, len));
      pos += len;
    }
    StopMatcher matcher = MakeMatcher(WithStops(stops, include),
                                      static_cast<int32_t>(deltas.size() + 1));
    std::string got;
    for (const std::string& delta : deltas) {
      const StopDecision d = AddOrDie(matcher, delta);
      got += d.text;
      ASSERT_EQ(want.compare(0, got.size(), got), 0)
          << "streamed past the cut: " << got << " want " << want;
      if (d.finish.has_value()) break;
    }
    got += matcher.Flush();  // end of text without a match
    ASSERT_EQ(got, want) << "text " << text << " trial " << trial;
  }
}

}  // namespace
}  // namespace tributary

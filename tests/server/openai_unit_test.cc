// The pure parts of the OpenAI-compatible API: the reasoning splitter on
// synthetic text (the default model has no <think> habits), request
// parsing, and the renaming of the converter's field names in errors.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"
#include "gtest/gtest.h"
#include "server/openai_protocol.h"
#include "server/reasoning_parser.h"

namespace tributary {
namespace {

// Feeds `text` in deltas of `step` bytes and joins the output.
ReasoningDelta FeedInPieces(const std::string& text, size_t step,
                            bool in_reasoning) {
  ReasoningParser parser(in_reasoning);
  ReasoningDelta all;
  for (size_t i = 0; i < text.size(); i += step) {
    ReasoningDelta d = parser.Feed(text.substr(i, step));
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  ReasoningDelta d = parser.Finish();
  all.reasoning += d.reasoning;
  all.content += d.content;
  return all;
}

TEST(ReasoningParserTest, SplitsAtTheClosingTagInEveryDeltaSize) {
  const std::string text = "\nLet me think.\n</think>\n\nThe answer is 4.";
  for (size_t step = 1; step <= text.size(); ++step) {
    SCOPED_TRACE(step);
    const ReasoningDelta d = FeedInPieces(text, step, /*in_reasoning=*/true);
    EXPECT_EQ(d.reasoning, "Let me think.\n");
    EXPECT_EQ(d.content, "The answer is 4.");
  }
}

TEST(ReasoningParserTest, RecognisesAnOpeningTagAtTheStart) {
  const std::string text = "  <think>\nhmm</think>\n\nyes";
  for (size_t step = 1; step <= text.size(); ++step) {
    SCOPED_TRACE(step);
    const ReasoningDelta d = FeedInPieces(text, step, false);
    EXPECT_EQ(d.reasoning, "hmm");
    EXPECT_EQ(d.content, "yes");
  }
}

TEST(ReasoningParserTest, ContentOnlyWithoutTags) {
  EXPECT_EQ(ReasoningParser::SplitAll("plain <think> later", false).content,
            "plain <think> later");
  EXPECT_EQ(ReasoningParser::SplitAll("<thin", false).content, "<thin");
  // Never closed: everything is reasoning, a partial tag included.
  const ReasoningDelta open = ReasoningParser::SplitAll("still going </thi", true);
  EXPECT_EQ(open.reasoning, "still going </thi");
  EXPECT_EQ(open.content, "");
}

TEST(ReasoningParserTest, HoldsBackOnlyAPossibleTag) {
  ReasoningParser parser(true);
  EXPECT_EQ(parser.Feed("abc<").reasoning, "abc");
  EXPECT_EQ(parser.Feed("b").reasoning, "<b");
  ReasoningDelta d = parser.Feed("</think>x");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "x");
}

// An unknown model's name is quoted in the error cut at 64 bytes, never in
// the middle of a character (the message must stay UTF-8 for the JSON
// reply; found by request_fuzzer).
TEST(OpenAiProtocolTest, AnUnknownModelNameIsQuotedInWholeCharacters) {
  std::string name(63, 'x');
  name += "\u080d\u080d";  // 3 bytes each in UTF-8: the 64-byte cut falls inside
  OpenAiRequest r;
  auto e = ParseOpenAiRequest(absl::StrCat(R"({"model": ")", name, R"(", "prompt": "a"})"),
                              OpenAiEndpoint::kCompletions, "m", &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 404);
  EXPECT_EQ(e->param, "model");
  EXPECT_TRUE(ValidateUtf8(e->message).ok()) << e->message;
  EXPECT_NE(e->message.find("\"" + std::string(63, 'x') + "\""), std::string::npos)
      << e->message;
  EXPECT_NO_THROW((void)e->ToJson().dump());
}

TEST(OpenAiProtocolTest, ParsesAChatRequest) {
  OpenAiRequest r;
  auto e = ParseOpenAiRequest(
      R"({"model": "m", "messages": [{"role": "developer", "content": "s"},
          {"role": "user", "content": [{"type": "text", "text": "a"},
                                       {"type": "text", "text": "b"}]}],
          "max_completion_tokens": 5, "temperature": 0.5, "top_k": -1,
          "seed": -1, "stop": "x", "logprobs": true, "top_logprobs": 2,
          "stream": true, "stream_options": {"include_usage": true},
          "chat_template_kwargs": {"enable_thinking": false}, "user": "u"})",
      OpenAiEndpoint::kChatCompletions, "m", &r);
  ASSERT_FALSE(e.has_value()) << e->message;
  const v1::GenerateRequest& g = r.generate;
  ASSERT_EQ(g.chat().messages_size(), 2);
  EXPECT_EQ(g.chat().messages(0).role(), "system");
  EXPECT_EQ(g.chat().messages(1).content(), "ab");
  EXPECT_FALSE(g.chat().enable_thinking());
  EXPECT_EQ(g.stopping().max_new_tokens(), 5);
  EXPECT_EQ(g.stopping().stop(0), "x");
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_EQ(g.sampling().top_k(), 0);
  EXPECT_EQ(g.sampling().seed(), ~uint64_t{0});
  EXPECT_TRUE(g.response().logprobs());
  EXPECT_EQ(g.response().top_logprobs(), 2);
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_EQ(r.enable_thinking, false);
}

TEST(OpenAiProtocolTest, RenamesConverterFields) {
  const OpenAiError t = ToOpenAiError(
      absl::InvalidArgumentError("sampling.top_p = 1.5 must be in (0, 1]"),
      OpenAiEndpoint::kCompletions);
  EXPECT_EQ(t.param, "top_p");
  EXPECT_EQ(t.message, "top_p = 1.5 must be in (0, 1]");
  const OpenAiError m = ToOpenAiError(
      absl::InvalidArgumentError("stopping.max_new_tokens = 9 is above"),
      OpenAiEndpoint::kChatCompletions);
  EXPECT_EQ(m.param, "max_tokens");
  const OpenAiError role = ToOpenAiError(
      absl::InvalidArgumentError("chat.messages[1].role = \"x\" must be"),
      OpenAiEndpoint::kChatCompletions);
  EXPECT_EQ(role.param, "messages[1].role");
  const OpenAiError full = ToOpenAiError(
      absl::ResourceExhaustedError("queue full"), OpenAiEndpoint::kCompletions);
  EXPECT_EQ(full.http_status, 429);
  EXPECT_EQ(full.retry_after_seconds, 1);
  EXPECT_EQ(ToOpenAiError(absl::UnavailableError("x"),
                          OpenAiEndpoint::kCompletions).http_status, 503);
  const nlohmann::json body = full.ToJson();
  EXPECT_TRUE(body["error"]["param"].is_null());
  EXPECT_EQ(body["error"]["code"], "queue_full");
}

}  // namespace
}  // namespace tributary

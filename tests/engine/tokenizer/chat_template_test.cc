#include "engine/tokenizer/chat_template.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/test_data.h"

namespace tributary {
namespace {

using ::testing::HasSubstr;

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse.", std::nullopt},
    {"user", "Hi", std::nullopt},
};

TEST(ChatTemplateTest, Qwen3ThinkingOnByDefault) {
  const Tokenizer* tokenizer = Qwen3Tokenizer();
  ASSERT_NE(tokenizer, nullptr);
  EXPECT_TRUE(tokenizer->chat_template().supports_thinking());
  EXPECT_TRUE(tokenizer->chat_template().thinking_default());
  const std::string prefix =
      "<|im_start|>system\nYou are terse.<|im_end|>\n"
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  // Qwen3's template (tokenizer_config.json) leaves <think> to the model:
  // with thinking on, its generation prompt adds nothing.
  EXPECT_FALSE(tokenizer->chat_template().generation_opens_think());
  EXPECT_EQ(*tokenizer->RenderChat(kConversation, {}), prefix);
  EXPECT_EQ(*tokenizer->RenderChat(kConversation, {true, true}), prefix);
  EXPECT_EQ(*tokenizer->RenderChat(kConversation, {true, false}),
            prefix + "<think>\n\n</think>\n\n");
  auto ids = tokenizer->EncodeChat(kConversation, {true, false});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->front(), *tokenizer->TokenToId("<|im_start|>"));
  // <think> and </think> are single tokens (151667, 151668).
  EXPECT_EQ(std::count(ids->begin(), ids->end(), 151667), 1);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), 151668), 1);
}

// Whether the generation prompt opens <think> comes from the template's
// text: Qwen3.5's emits '<think>\n' when thinking is on, Qwen3's (and the
// embedded default model's) only the thinking-off block.
TEST(ChatTemplateTest, GenerationOpensThinkOnlyWhereTheTemplateDoes) {
  const std::string off = "{{- '<think>\\n\\n</think>\\n\\n' }}";
  EXPECT_FALSE(ChatTemplate::GenerationOpensThinkFromTemplate(
      "{%- if enable_thinking is defined and enable_thinking is false %}" + off +
      "{%- endif %}"));
  EXPECT_TRUE(ChatTemplate::GenerationOpensThinkFromTemplate(
      "{%- if enable_thinking is defined and enable_thinking is false %}" + off +
      "{%- else %}{{- '<think>\\n' }}{%- endif %}"));
  ChatTemplate model_writes_it(/*has_think_token=*/true,
                               "{%- if enable_thinking is false %}" + off +
                                   "{%- endif %}");
  auto text = model_writes_it.Render({{"user", "x", std::nullopt}}, {});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, OptInTemplateDefaultsToNoThinking) {
  const Tokenizer* tiny = TinyQwen35Tokenizer();
  ASSERT_NE(tiny, nullptr);
  EXPECT_TRUE(tiny->chat_template().supports_thinking());
  EXPECT_FALSE(tiny->chat_template().thinking_default());
  auto text = tiny->RenderChat({{"user", "x", std::nullopt}}, {});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n"
            "<think>\n\n</think>\n\n");
  EXPECT_TRUE(ChatTemplate::ThinkingDefaultFromTemplate(
      "{%- if enable_thinking is defined and enable_thinking is false %}"));
  EXPECT_TRUE(ChatTemplate::ThinkingDefaultFromTemplate(""));
}

TEST(ChatTemplateTest, NoThinkTokenGivesPlainChatMl) {
  ChatTemplate plain(/*has_think_token=*/false, "");
  EXPECT_FALSE(plain.supports_thinking());
  for (std::optional<bool> thinking : {std::optional<bool>(), std::optional<bool>(true),
                                       std::optional<bool>(false)}) {
    auto text = plain.Render(kConversation, {true, thinking});
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text,
              "<|im_start|>system\nYou are terse.<|im_end|>\n"
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  }
  auto no_prompt = plain.Render({{"user", "a", std::nullopt}}, {false, {}});
  EXPECT_EQ(*no_prompt, "<|im_start|>user\na<|im_end|>\n");
}

TEST(ChatTemplateTest, HistoricalAssistantTurnsDropReasoning) {
  ChatTemplate chat(/*has_think_token=*/true, "");
  std::vector<ChatMessage> messages = {
      {"user", "Q1", std::nullopt},
      {"assistant", "<think>\nold reasoning\n</think>\n\nA1", std::nullopt},
      {"user", "Q2", std::nullopt},
      {"assistant", "A2", std::string("new reasoning")},
  };
  auto text = chat.Render(messages, {false, {}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "<|im_start|>user\nQ1<|im_end|>\n"
            "<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nnew reasoning\n</think>\n\nA2"
            "<|im_end|>\n");
}

TEST(ChatTemplateTest, UnknownRoleIsAnError) {
  ChatTemplate chat(true, "");
  auto text = chat.Render({{"tool", "x", std::nullopt}}, {});
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("'tool'"));
}

}  // namespace
}  // namespace tributary

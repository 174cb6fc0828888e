// ChatML rendering of a conversation (the Qwen chat template family), in
// C++ rather than Jinja: the server needs only the text shape, which is
// fixed across Qwen2/2.5/3/3.5.
//
//   system/user:  <|im_start|>{role}\n{content}<|im_end|>\n
//   assistant:    <|im_start|>assistant\n{content}<|im_end|>\n
//   generation:   <|im_start|>assistant\n            (no <think> in the vocab)
//                 <|im_start|>assistant\n<think>\n   (thinking on, when the
//                                                    template opens <think>)
//                 <|im_start|>assistant\n            (thinking on, when the
//                                                    model writes its own)
//                 <|im_start|>assistant\n<think>\n\n</think>\n\n  (off)
// Whether the template opens <think> for the model (Qwen3.5's does; Qwen3's
// and the embedded default model's leave it to the model) is read from the
// template text: it does when it emits the literal '<think>\n' on its own.
// An empty template is taken as Qwen3.5's.
//
// Assistant turns and reasoning, following the Qwen3 template: the
// reasoning of a turn is its `reasoning_content`, else the text before
// "</think>" in its content (the content keeps only what follows). Turns
// before the last user message drop their reasoning; turns after it (a
// multi-step answer in progress) keep it as <think>\n{reasoning}\n</think>\n\n
// when it is non-empty or the turn is the last message.
//
// The default of enable_thinking is read from the model's chat template:
// when the template has an opt-in test (`enable_thinking is true`, or
// `if enable_thinking %}` without `is false`/`is defined`), thinking is off
// by default (Qwen3.5 small models); otherwise (an opt-out test
// `enable_thinking is false`, or no test at all) it is on. Without <think>
// in the vocabulary there is no thinking and enable_thinking is ignored.
//
// Roles other than system, user and assistant are InvalidArgument errors.
// Immutable; thread-safe.
#ifndef TRIBUTARY_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_
#define TRIBUTARY_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tributary {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
  std::optional<std::string> reasoning_content;
};

struct ChatOptions {
  bool add_generation_prompt = true;
  // nullopt: the model's default (ChatTemplate::thinking_default()).
  std::optional<bool> enable_thinking;
};

class ChatTemplate {
 public:
  // `has_think_token`: whether <think> and </think> are tokens.
  // `template_text`: the Jinja chat_template of tokenizer_config.json ("" if
  // none), only read to decide the enable_thinking default.
  ChatTemplate(bool has_think_token, absl::string_view template_text);

  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     const ChatOptions& options) const;

  bool supports_thinking() const { return has_think_token_; }
  bool thinking_default() const { return thinking_default_; }
  // Whether a generation prompt with thinking on ends inside an open
  // <think> (so the answer starts as reasoning), or the model opens it.
  bool generation_opens_think() const { return generation_opens_think_; }

  // The rules above, exposed for tests.
  static bool ThinkingDefaultFromTemplate(absl::string_view template_text);
  static bool GenerationOpensThinkFromTemplate(absl::string_view template_text);

 private:
  bool has_think_token_;
  bool thinking_default_;
  bool generation_opens_think_;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_

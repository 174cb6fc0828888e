#include "engine/tokenizer/chat_template.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace tributary {
namespace {

absl::string_view StripChars(absl::string_view text, char c, bool left,
                             bool right) {
  while (left && !text.empty() && text.front() == c) text.remove_prefix(1);
  while (right && !text.empty() && text.back() == c) text.remove_suffix(1);
  return text;
}

}  // namespace

bool ChatTemplate::ThinkingDefaultFromTemplate(absl::string_view t) {
  const bool opt_in = absl::StrContains(t, "enable_thinking is true") ||
                      absl::StrContains(t, "if enable_thinking %}") ||
                      absl::StrContains(t, "if enable_thinking -%}");
  return !opt_in;
}

bool ChatTemplate::GenerationOpensThinkFromTemplate(absl::string_view t) {
  // The Jinja string literal '<think>\n' (backslash n in the template's
  // text); '<think>\n\n</think>\n\n', the thinking-off block, is not it.
  return t.empty() || absl::StrContains(t, "'<think>\\n'") ||
         absl::StrContains(t, "\"<think>\\n\"");
}

ChatTemplate::ChatTemplate(bool has_think_token,
                           absl::string_view template_text)
    : has_think_token_(has_think_token),
      thinking_default_(has_think_token &&
                        ThinkingDefaultFromTemplate(template_text)),
      generation_opens_think_(has_think_token &&
                              GenerationOpensThinkFromTemplate(template_text)) {}

absl::StatusOr<std::string> ChatTemplate::Render(
    const std::vector<ChatMessage>& messages, const ChatOptions& options) const {
  // The last "real" user query (a user turn that is not only a tool
  // response), as in the Qwen3 template.
  int last_query = static_cast<int>(messages.size()) - 1;
  for (int i = static_cast<int>(messages.size()) - 1; i >= 0; --i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" &&
        !(absl::StartsWith(m.content, "<tool_response>") &&
          absl::EndsWith(m.content, "</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system" || m.role == "user") {
      absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content,
                      "<|im_end|>\n");
      continue;
    }
    if (m.role != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat(
          "chat message ", i, " has role '", m.role,
          "' (supported: system, user, assistant)"));
    }
    absl::string_view content = m.content;
    absl::string_view reasoning;
    if (m.reasoning_content) {
      reasoning = *m.reasoning_content;
    } else if (has_think_token_) {
      const size_t close = content.find("</think>");
      if (close != absl::string_view::npos) {
        absl::string_view before = content.substr(0, close);
        const size_t last_close = content.rfind("</think>");
        content = StripChars(content.substr(last_close + 8), '\n', true, false);
        before = StripChars(before, '\n', false, true);
        const size_t open = before.rfind("<think>");
        if (open != absl::string_view::npos) before = before.substr(open + 7);
        reasoning = StripChars(before, '\n', true, false);
      }
    }
    const bool last = i + 1 == messages.size();
    if (has_think_token_ && static_cast<int>(i) > last_query &&
        (last || !reasoning.empty())) {
      absl::StrAppend(&out, "<|im_start|>assistant\n<think>\n",
                      StripChars(reasoning, '\n', true, true), "\n</think>\n\n",
                      StripChars(content, '\n', true, false));
    } else {
      absl::StrAppend(&out, "<|im_start|>assistant\n", content);
    }
    out += "<|im_end|>\n";
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (has_think_token_) {
      const bool thinking = options.enable_thinking.value_or(thinking_default_);
      if (!thinking) {
        out += "<think>\n\n</think>\n\n";
      } else if (generation_opens_think_) {
        out += "<think>\n";
      }
    }
  }
  return out;
}

}  // namespace tributary

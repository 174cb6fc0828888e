// Splits a chat answer's streamed text into the reasoning (between <think>
// and </think>) and the content, as vLLM's reasoning parsers do for Qwen3
// (`reasoning_content` beside `content`).
//
// Qwen3.5's template opens the thinking block in the prompt when thinking is
// on (`<|im_start|>assistant\n<think>\n`), so the generated text starts
// inside the reasoning and only "</think>" appears; with thinking off, or a
// model that opens the block itself, a leading "<think>" is recognised too.
// A tag split across deltas is held back until it is decided, so every
// delta of the output is final. Newlines right after a tag are dropped (the
// template's formatting, not the model's words).
//
// Pure and incremental: Feed each text delta in order, then Finish.
#ifndef TRIBUTARY_SERVER_REASONING_PARSER_H_
#define TRIBUTARY_SERVER_REASONING_PARSER_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tributary {

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

class ReasoningParser {
 public:
  // `in_reasoning`: the prompt opened the thinking block.
  explicit ReasoningParser(bool in_reasoning);

  ReasoningDelta Feed(absl::string_view text);
  // What was held back (a partial tag that never completed).
  ReasoningDelta Finish();

  // Splits a whole text at once (Feed + Finish).
  static ReasoningDelta SplitAll(absl::string_view text, bool in_reasoning);

 private:
  enum class State { kStart, kReasoning, kContent };
  void Emit(absl::string_view text, ReasoningDelta* out);

  State state_;
  std::string held_;   // undecided text (a possible partial tag)
  bool skip_newlines_;  // right after a tag
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_REASONING_PARSER_H_

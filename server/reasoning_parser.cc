#include "server/reasoning_parser.h"

#include <algorithm>

namespace tributary {
namespace {

constexpr absl::string_view kOpen = "<think>";
constexpr absl::string_view kClose = "</think>";

// The length of the longest suffix of `text` that is a proper prefix of
// `tag` (text that may become the tag with the next delta).
size_t PartialTagSuffix(absl::string_view text, absl::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ReasoningParser::ReasoningParser(bool in_reasoning)
    : state_(in_reasoning ? State::kReasoning : State::kStart),
      skip_newlines_(in_reasoning) {}

void ReasoningParser::Emit(absl::string_view text, ReasoningDelta* out) {
  if (skip_newlines_) {
    const size_t first = text.find_first_not_of('\n');
    if (first == absl::string_view::npos) return;
    text.remove_prefix(first);
    skip_newlines_ = false;
  }
  (state_ == State::kReasoning ? out->reasoning : out->content)
      .append(text.data(), text.size());
}

ReasoningDelta ReasoningParser::Feed(absl::string_view text) {
  ReasoningDelta out;
  held_.append(text.data(), text.size());
  for (;;) {
    if (state_ == State::kStart) {
      // Only a "<think>" at the start (after white space) opens a block.
      const size_t first = held_.find_first_not_of(" \t\r\n");
      if (first == std::string::npos) return out;  // undecided yet
      const absl::string_view rest = absl::string_view(held_).substr(first);
      if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) {
        return out;  // a partial "<think>"
      }
      if (rest.substr(0, kOpen.size()) == kOpen) {
        held_.erase(0, first + kOpen.size());
        state_ = State::kReasoning;
        skip_newlines_ = true;
        continue;
      }
      state_ = State::kContent;
      continue;
    }
    if (state_ == State::kContent) {
      Emit(held_, &out);
      held_.clear();
      return out;
    }
    // In the reasoning: up to "</think>", holding back a partial one.
    const size_t close = absl::string_view(held_).find(kClose);
    if (close != absl::string_view::npos) {
      Emit(absl::string_view(held_).substr(0, close), &out);
      held_.erase(0, close + kClose.size());
      state_ = State::kContent;
      skip_newlines_ = true;
      continue;
    }
    const size_t keep = PartialTagSuffix(held_, kClose);
    Emit(absl::string_view(held_).substr(0, held_.size() - keep), &out);
    held_.erase(0, held_.size() - keep);
    return out;
  }
}

ReasoningDelta ReasoningParser::Finish() {
  ReasoningDelta out;
  if (state_ == State::kStart) state_ = State::kContent;
  Emit(held_, &out);
  held_.clear();
  return out;
}

ReasoningDelta ReasoningParser::SplitAll(absl::string_view text,
                                         bool in_reasoning) {
  ReasoningParser parser(in_reasoning);
  ReasoningDelta out = parser.Feed(text);
  ReasoningDelta rest = parser.Finish();
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  return out;
}

}  // namespace tributary
